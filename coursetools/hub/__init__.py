"""The class route: the course on JupyterHub (serve), and the students' notebooks gathered for the
grader (collect). See coursetools.hub.cli and the README's "For instructors"."""
