"""Growler's OCI image, built with Debian's buildah (``make image``; tests/integration/test_image.py).

  python -m scripts.image wheels                  pinned wheels into .cache/image-wheels (pip, on the host)
  python -m scripts.image base [--tag T]          a Debian 12 base with python3 from Debian's packages
                                                  (debootstrap), tagged locally: no registry needed
  python -m scripts.image build --base B [--tag T] deploy/Containerfile on base B

Each prints its result alone on stdout (a directory, an image's name); the steps' progress goes
to stderr.

Why wheels on the host: the build then needs no package index and no compiler, and the host's pip
is the one configured for this network (its certificates, its index). Why debootstrap: a base
image cannot be pulled where no registry is reachable; the rootfs tarball is kept in .cache/image
so only the first run pays for it, and the tagged base stays in buildah's store.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".cache"
WHEELS = CACHE / "image-wheels"
BASE_DIR = CACHE / "image"
SUITE = "bookworm"  # Debian 12: python3 is 3.11
MIRROR = "http://deb.debian.org/debian"
BASE_TAG = f"localhost/growler-base:{SUITE}"
IMAGE_TAG = "localhost/growler:latest"
PIP_VERSION = "25.3"  # runs from its wheel inside the build; not left in the image
# minbase (dpkg, apt, coreutils, passwd: useradd) + Debian's Python 3.11 + CA certificates
BASE_PACKAGES = ("python3", "ca-certificates")


def log(message: str) -> None:
    print(f"[image] {message}", file=sys.stderr, flush=True)


def _run(command: list[str], **kwargs) -> None:
    """Run a step with its output on stderr: stdout carries the command's one result (an image's
    name, a directory), which ``make image`` reads (``base=$(python -m scripts.image base)``).
    debootstrap's and buildah's progress went to stdout too, so on a fresh machine - no base
    image yet - that name came with hundreds of lines of progress and the build failed; the
    second run, with nothing to build, succeeded."""
    log(" ".join(command))
    sys.stdout.flush()
    subprocess.run(command, check=True, stdout=sys.stderr.fileno(), **kwargs)


def ensure_wheels() -> Path:
    """Every wheel requirements.txt pins (and pip's own), downloaded once per version of the file."""
    digest = hashlib.sha256((REPO / "requirements.txt").read_bytes() + PIP_VERSION.encode()).hexdigest()[:16]
    stamp = WHEELS / f".complete-{digest}"
    if stamp.exists():
        return WHEELS
    if WHEELS.is_symlink():  # a link to another checkout's cache: leave that one alone
        WHEELS.unlink()
    shutil.rmtree(WHEELS, ignore_errors=True)
    WHEELS.mkdir(parents=True)
    _run(
        [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-input", "--only-binary=:all:",
         "--python-version", "3.11", "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_28_x86_64",
         "--platform", "manylinux_2_34_x86_64", "--implementation", "cp",
         "-d", str(WHEELS), "-r", str(REPO / "requirements.txt"), f"pip=={PIP_VERSION}"]
    )  # fmt: skip
    stamp.touch()
    return WHEELS


def image_exists(tag: str) -> bool:
    found = subprocess.run(["buildah", "images", "--quiet", tag], capture_output=True, text=True)
    return found.returncode == 0 and bool(found.stdout.strip())


def base_tarball() -> Path:
    """The Debian rootfs as a tarball in .cache/image, made with debootstrap unless already there."""
    packages = ",".join(BASE_PACKAGES)
    tarball = BASE_DIR / f"debian-{SUITE}-{hashlib.sha256(packages.encode()).hexdigest()[:8]}.tar"
    if tarball.exists():
        return tarball
    BASE_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BASE_DIR, prefix=".rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        _run(["debootstrap", "--variant=minbase", f"--include={packages}", SUITE, str(rootfs), MIRROR])
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for path in (rootfs / leftover).glob("*"):
                if path.is_file():
                    path.unlink()
        partial = tarball.with_suffix(".tar.partial")
        _run(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(partial), "."])
        partial.rename(tarball)
    return tarball


def ensure_base(tag: str = BASE_TAG) -> str:
    """A local base image named ``tag`` (kept in buildah's store; rebuilt from the tarball if gone)."""
    if image_exists(tag):
        return tag
    tarball = base_tarball()
    containerfile = tarball.parent / "Containerfile.base"
    containerfile.write_text(f'FROM scratch\nADD {tarball.name} /\nCMD ["/bin/bash"]\n')
    _run(["buildah", "bud", "--isolation", "chroot", "-f", str(containerfile), "-t", tag, str(tarball.parent)])
    return tag


def build(base: str, tag: str = IMAGE_TAG) -> str:
    ensure_wheels()
    _run(
        ["buildah", "bud", "--isolation", "chroot", "--layers", "--pull-never" if image_exists(base) else "--pull",
         "-f", str(REPO / "deploy" / "Containerfile"), "--ignorefile", str(REPO / "deploy" / "Containerfile.ignore"),
         "--build-arg", f"BASE={base}", "-t", tag, str(REPO)]
    )  # fmt: skip
    return tag


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.image", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("wheels")
    base = sub.add_parser("base")
    base.add_argument("--tag", default=BASE_TAG)
    image = sub.add_parser("build")
    image.add_argument("--base", required=True)
    image.add_argument("--tag", default=IMAGE_TAG)
    args = parser.parse_args(argv)
    if args.command == "wheels":
        print(ensure_wheels())
    elif args.command == "base":
        print(ensure_base(args.tag))
    else:
        print(build(args.base, args.tag))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
