"""The resume lab: train, interrupt, resume, and prove the resume bitwise exact."""
