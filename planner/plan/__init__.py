"""Plan composition: the memory plan and step model once per deployment, and the layout search."""
