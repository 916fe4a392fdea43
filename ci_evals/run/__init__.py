"""Running a suite: the `Runner` (scenarios, repeats, stages in their workspaces,
results written after every stage), the progress display (`progress`), and the
grading hook the runner calls after each stage (`grading_hook`)."""
