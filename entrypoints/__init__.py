"""Pod start per role: PodInfo -> NodeSpec -> rendered config -> supervisord."""
