"""Files and folders: copying (`copy`), content snapshots (`snapshot`), a stage's
saved state (`state`), the retry checkpoint (`checkpoint`), the one atomic
write (`atomic`) and the one tree walk (`walk`).

Links are never followed out of a tree, and nothing here knows about agents.
"""
