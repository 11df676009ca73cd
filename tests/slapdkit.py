"""The test directory: Debian's slapd (tests/slapd), its users' ssh keys, its seed and the sssd.conf that
reads it. The image and cluster suites both use it; the LDAP users exist only in this slapd.
Ref: slapd(8), ldapadd(1), sssd-ldap(5)
"""

from __future__ import annotations

import string
import subprocess
from pathlib import Path
from typing import Any

from slurmpod_host.images.flavors import Flavor

SLAPD_DIR = Path(__file__).resolve().parent / "slapd"
# ldapadd's arguments as the directory's admin, through slapd's local socket (ldapi).
ADMIN = ("-x", "-D", "cn=admin,dc=example,dc=org", "-w", "test-admin", "-H", "ldapi:///")
USERS = ("alice", "bob")
# A name looked up before it existed is remembered as absent for [nss] entry_negative_timeout (15 s by
# default); a cached entry is refreshed after entry_cache_timeout (5 s in slapd/sssd.conf). Ref: sssd.conf(5)
NEW_USER_BOUND_S = 15 + 5 + 10


def image_tag(flavor: Flavor) -> str:
    return f"slurmpod-test/slapd:{flavor.suite}"


def build_image(client: Any, flavor: Flavor) -> str:
    """slurmpod-test/slapd:<suite>, from the flavor's debootstrapped root file system (no registry)."""
    tag = image_tag(flavor)
    client.images.build(path=str(SLAPD_DIR), tag=tag, rm=True, buildargs={
        "ROOTFS_IMAGE": f"slurmpod/rootfs:{flavor.suite}",
        "APT_CHECK_VALID_UNTIL": "true" if flavor.apt_check_valid_until else "false"})
    return tag


def make_keys(directory: Path) -> Path:
    """ed25519 key pairs alice, bob (stored in their entries) and other (in no entry) under ``directory``."""
    for who in (*USERS, "other"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", who, "-f", str(directory / who)],
                       check=True, timeout=30)
    return directory


def seed_ldif(keys: Path) -> str:
    """alice (5001; groups ml, inference) and bob (5002), each with their public key."""
    seed = string.Template((SLAPD_DIR / "seed.ldif").read_text())
    return seed.substitute(alice_key=(keys / "alice.pub").read_text().strip(),
                           bob_key=(keys / "bob.pub").read_text().strip())


def sssd_conf(ldap_host: str) -> str:
    return string.Template((SLAPD_DIR / "sssd.conf").read_text()).substitute(ldap_host=ldap_host)


def user_ldif(name: str, uid: int, gid: int) -> str:
    """An entry for a user added after the pods started."""
    return (f"dn: uid={name},ou=people,dc=example,dc=org\nobjectClass: inetOrgPerson\nobjectClass: posixAccount\n"
            f"uid: {name}\ncn: {name}\nsn: New\nuidNumber: {uid}\ngidNumber: {gid}\nhomeDirectory: /home/{name}\n")
