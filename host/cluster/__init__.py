"""Pods emulated with Docker, read from the Kubernetes manifests in deploy/."""
