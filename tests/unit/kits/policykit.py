"""Helpers for the policy tests: the shipped default policy, and policies written from YAML text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import paths
import yaml

from slurmpod.policy import loader
from slurmpod.policy.model import Policy
from slurmpod.policy.request import JobRequest

# The chart's default output; its `slurmpod-policy` ConfigMap holds the shipped policy.
DEPLOY_POLICY = paths.REPO / "deploy" / "kubernetes" / "slurmpod.yaml"


def default_policy_text() -> str:
    (manifest,) = [d for d in yaml.safe_load_all(DEPLOY_POLICY.read_text(encoding="utf-8"))
                   if d and d["kind"] == "ConfigMap" and d["metadata"]["name"] == "slurmpod-policy"]
    text: str = manifest["data"]["policy.yaml"]
    return text


def default_policy() -> Policy:
    return loader.parse(yaml.safe_load(default_policy_text()), DEPLOY_POLICY.parent)


def policy(text: str, base: Path = DEPLOY_POLICY.parent) -> Policy:
    return loader.parse(yaml.safe_load(text), base)


def job(**kw: Any) -> JobRequest:
    kw.setdefault("uid", 2000)
    kw.setdefault("user", "researcher")
    return JobRequest(**kw)


BLOCK = """
topology: {plugin: block, groupSize: 4, oversize: segment}
"""
TREE = """
topology: {plugin: tree, groupSize: 4, maxSwitchWaitSeconds: 300, oversize: reject}
"""
