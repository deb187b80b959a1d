"""Instructor grading: run submissions in a sandbox, judge their values outside it."""
