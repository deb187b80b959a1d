"""Interactive widgets: each a pure compute function of its parameters, drawn by a small UI."""
