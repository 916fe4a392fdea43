"""JavaScript patterns matched with Python's re: checked against node's own RegExp.

node is the oracle (a process boundary): each pattern is compiled by both and
`test` / the global match count compared on texts chosen to hit the differences
(line terminators, trailing newlines, Unicode digits and spaces, astral
characters, empty matches). Refused constructs are refused by name.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from ci_evals.grading.kinds.js_regex import JsRegexError, compile_js

TEXTS = [
    "",
    "hello world",
    "Hello\nWorld\n",
    "line1\r\nline2\u2028line3\u2029end",
    "tab\there\u00a0nbsp\ufeffbom\x1cfs\x85nel",
    "digits 123 \u0663\u0664 arabic",
    "caf\u00e9 na\u00efve \u00fcber_x",
    "emoji \U0001f600 and \U0001f601!",
    "aaa bbb aaa",
    "{a,3} [x] a{,2} \\ / -",
    "Done.",
    "Done.\n",
]

PATTERNS = [
    ("hello", ""),
    ("^Done\\.$", ""),
    ("^World$", "m"),
    ("^line2$", "m"),
    ("line1.line2", ""),
    ("line1.line2", "s"),
    ("\\d+", ""),
    ("\\d+", "u"),
    ("\\w+", ""),
    ("\\W", ""),
    ("\\bna", ""),
    ("\\Bve", ""),
    ("\\s", ""),
    ("\\S+", ""),
    ("[^]", ""),
    ("[]", ""),
    ("a{,2}", ""),
    ("a{2}", ""),
    ("a{1,}?", ""),
    ("{a,3}", ""),
    ("x*", ""),
    ("a*", ""),
    ("(?<word>aaa)", ""),
    ("(?:aaa|bbb)", "g"),
    ("^.$", ""),
    ("^emoji .", ""),
    ("^emoji .{2} ", ""),
    ("^emoji . ", "u"),
    ("\\u{1F600}", "u"),
    ("\\u00e9", ""),
    ("\\x2f", ""),
    ("\\cJ", ""),
    ("[\\d-]+", ""),
    ("[a-c&&]", ""),
    ("hello", "i"),
    ("HELLO", "i"),
    ("(?<=l)o", ""),
    ("(?<!l)o", ""),
    ("o(?=r)", ""),
    ("o(?!r)", ""),
    ("aaa", "y"),
    ("a", "gy"),
    ("\\/", ""),
    ("\\[x\\]", ""),
    ("[\\]]", ""),
    ("\\0", ""),
    ("$", ""),
    ("^", "m"),
    ("$", "m"),
]

NODE = """
const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const out = cases.map(([p, f, t]) => {
  const re = new RegExp(p, f);
  const g = f.includes('g') ? f : f + 'g';
  return [re.test(t), (t.match(new RegExp(p, g)) || []).length];
});
process.stdout.write(JSON.stringify(out));
"""


def _node(cases: list[tuple[str, str, str]]) -> list[list[object]]:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is needed as the oracle of JavaScript's RegExp: install nodejs")
    done = subprocess.run(
        [node, "-e", NODE], input=json.dumps(cases), capture_output=True, text=True, check=True
    )
    result: list[list[object]] = json.loads(done.stdout)
    return result


def test_translated_patterns_match_as_javascript_does() -> None:
    cases = [(p, f, t) for p, f in PATTERNS for t in TEXTS]
    expected = _node(cases)
    differences = []
    for (pattern, flags, text), (js_test, js_count) in zip(cases, expected, strict=True):
        regex = compile_js(pattern, flags)
        got = [regex.test(text), regex.count(text)]
        if got != [js_test, js_count]:
            differences.append(
                f"/{pattern}/{flags} on {text!r}: js {js_test, js_count}, ours {got}"
            )
    assert not differences, "\n".join(differences)


@pytest.mark.parametrize(
    ("pattern", "flags", "named"),
    [
        ("(a)\\1", "", "backreference"),
        ("\\k<x>", "", "backreference"),
        ("\\Z", "", "\\Z"),
        ("\\A", "", "\\A"),
        ("\\z", "", "\\z"),
        ("\\a", "", "\\a"),
        ("(?P<x>a)", "", "a group JavaScript does not have"),
        ("(?>a)", "", "a group JavaScript does not have"),
        ("(?i)a", "", "a group JavaScript does not have"),
        ("(?#c)a", "", "a group JavaScript does not have"),
        ("a*+", "", "possessive"),
        ("\\p{L}", "u", "Unicode properties"),
        ("\\u{41}", "", "without u"),
        ("\\uD83D\\uDE00", "u", "surrogate"),
        ("[a--b]", "v", "set operation"),
        ("[\\q{ab}]", "v", "\\q"),
        ("\\w", "iu", "U+017F"),
        ("\\01", "", "octal"),
        ("(?<=a+)b", "", "Python's re cannot"),
        ("a", "x", "unknown flag"),
        ("a", "gg", "twice"),
        ("(a", "", "Python's re cannot"),
        ("a{", "u", "quantifier"),
    ],
)
def test_constructs_that_differ_are_refused(pattern: str, flags: str, named: str) -> None:
    with pytest.raises(JsRegexError, match=None) as caught:
        compile_js(pattern, flags)
    assert named in str(caught.value)


def test_case_folding_that_differs_is_an_error_at_match_time() -> None:
    regex = compile_js("k", "i")
    assert regex.test("K")
    with pytest.raises(JsRegexError, match="U\\+212A"):
        regex.test("\u212a")
    assert compile_js("k", "iu").test("\u212a")  # simple case folding: the same in both
