"""Kernel calls the standard library lacks, and the sandbox's read-only root built with them.

``unshare``, ``mount``, ``umount`` and ``prctl`` through libc (ctypes); :func:`build_root` makes the root a
program sees (``layout.py`` computes its mounts on the host), and the probes tell start-up which
namespaces and mounts the kernel allows here (a container without ``CAP_SYS_ADMIN`` refuses them).
"""

from __future__ import annotations

import contextlib
import ctypes
import os

from .state import CONFIG

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    check(libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    check(libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def build_root(root: str, mounts: list, workdir_mb: int) -> None:
    """Builds a minimal root under ``root`` (a tmpfs holding the layout's read-only mounts) and chroots."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=755")
    for kind, source, target in mounts:
        _place(root, kind, source, target)
    os.makedirs(root + "/dev", exist_ok=True)
    for dev in ("null", "zero", "full", "random", "urandom"):
        target = f"{root}/dev/{dev}"
        open(target, "a").close()
        mount(f"/dev/{dev}", target, None, MS_BIND)
    os.makedirs(root + "/proc", mode=0o555, exist_ok=True)  # mount point of a compiled program's own /proc
    os.makedirs(root + "/runs", exist_ok=True)
    # Mount points of the programs' working dirs (each a tmpfs of its own, see supervisor.py); their
    # shared home where per-program mounts are refused, capped so that no program fills the host's disk.
    mount("tmpfs", root + "/runs", "tmpfs", MS_NOSUID | MS_NODEV, f"size={workdir_mb}m,mode=711")
    os.chmod(root, 0o755)
    os.chroot(root)
    os.chdir("/")


def _place(root: str, kind: str, source: str, target: str) -> None:
    """One mount of the layout (``layout.py``): a read-only bind, a symlink, or an empty mount hiding
    what an earlier bind showed (a site-packages directory, a cache, a dataset file)."""
    path = root + target
    if kind == "link":
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.lexists(path):
            os.symlink(source, path)
    elif kind == "hide_dir":
        if os.path.isdir(path):
            mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=555")
    elif kind == "hide_file":
        if os.path.isfile(path):
            mount("/dev/null", path, None, MS_BIND)
    elif os.path.lexists(source):
        if os.path.isdir(source):
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "a").close()
        mount(source, path, None, MS_BIND | MS_REC)
        mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID)


def probe_quota(runs_dir: str) -> bool:
    """Whether a tmpfs can be mounted per working directory here (root in our own mount namespace)."""
    probe = os.path.join(runs_dir, ".quota-probe")
    try:
        os.mkdir(probe)
        mount("tmpfs", probe, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m")
        umount(probe)
        return True
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(probe)


def umount(path: str) -> None:
    check(libc.umount2(path.encode(), MNT_DETACH), f"umount {path}")


def program_namespaces() -> int:
    """The namespaces each program gets of its own: IPC always, network unless the network is allowed
    (then programs share the host's)."""
    return CLONE_NEWIPC | (0 if CONFIG.get("network", False) else CLONE_NEWNET)


def allowed_in_child(flags: int) -> bool:
    """Whether a forked child may unshare ``flags`` here (probed once at start-up)."""
    try:
        pid = os.fork()
    except OSError:
        return False
    if pid == 0:
        try:
            unshare(flags)
            os._exit(0)
        except BaseException:
            os._exit(1)
    return os.waitpid(pid, 0)[1] == 0
