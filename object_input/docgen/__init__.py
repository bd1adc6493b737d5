"""Text generated from the declarations (options, steps), so that the docs cannot drift from the
code."""
