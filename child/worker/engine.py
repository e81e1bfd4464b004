"""The image-engine check a child runs when it starts: a host that cannot diff must not claim.

It runs in the child, never in the fork server: a process that ran a libvips operation and then
forks can deadlock its children.
"""

from __future__ import annotations


def check_engine() -> tuple[str, str | None]:
    """("libvips X.Y.Z", None) when libvips loads and computes; ("", why) otherwise."""
    try:
        import pyvips

        probe = pyvips.Image.black(2, 2) + 1
        if probe.avg() != 1.0:
            return "", "libvips computed a wrong value in its self-check"
        return f"libvips {pyvips.version(0)}.{pyvips.version(1)}.{pyvips.version(2)}", None
    except Exception as error:
        return "", f"{type(error).__name__}: {error}"


def set_threads(threads: int) -> None:
    """Worker threads libvips may use in this child, so that children x threads fits the CPUs."""
    import pyvips

    pyvips.concurrency_set(max(1, threads))
