"""The `docker` sandbox: a container per sandbox, from an image built from a recipe.

`kind` is what the registry loads (options, `prepare` builds the image) and
imports nothing heavy; `engine` (the containers, through the docker SDK),
`stream` (its exec stream pump) and `seccomp` (moby's default profile, vendored
in `moby_seccomp/`, minus reaching into others) load only when a container
opens. `recipe`, `image_build` and `recipes/` make the images (`ci-evals
sandbox build`); `leftovers` finds what a crash left (`ci-evals gc`). Nothing
outside this package imports its modules but those two commands.
"""
