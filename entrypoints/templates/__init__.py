"""Jinja2 templates for the files a pod renders at start."""
