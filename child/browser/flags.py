"""The command line the child's Chromium runs with, and why each switch is there.

Three concerns: a browser that a child can own (headless, its own profile, a DevTools port, no
first-run or crash-reporting machinery, nothing that phones home), one that never throttles the
page it is driven on (a headless page counts as hidden), and pixels that depend on the build
alone: the same story gives the same bytes on every host. For the last, text is rasterised
without hinting, sub-pixel positioning or LCD anti-aliasing, colours are plain sRGB, raster is
done by the CPU with Skia's baseline code path (its runtime-chosen SIMD paths differ between CPUs,
and Debian's wrapper turns GPU rasterisation on in `/etc/chromium.d`), and the device scale
factor is fixed. Field trials are off so that two hosts never run different feature sets.

What a page may reach is the kernel's to enforce first: the browser runs in a network of its
own that holds only the build's server (`child.browser.network`). The switches hold where that
network cannot be had, and behind it: the host resolver resolves no name (only 127.0.0.1, where
the build's server is, is excluded; an IP literal is never resolved, so this stops names only),
WebRTC sends UDP only through a proxy (the profile's `webrtc.ip_handling_policy`, which
`PREFERENCES` sets for the full browser, and the switch `--force-webrtc-ip-handling-policy` for
the headless shell: each browser ignores the other's way, measured),
and each page's proxy is the build's own server, which refuses whatever is sent through it
(`child.browser.site`): STUN and TURN to any address, over UDP and TCP, reach nothing. The
interception aborts every request that leaves the build's server (and, without the network of
its own, closes every WebSocket).
"""

from __future__ import annotations

import json
from pathlib import Path

#: The switches that make the child's own browser.
PROCESS = (
    "--headless",
    "--remote-debugging-port=0",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-crash-reporter",
    "--disable-breakpad",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-component-extensions-with-background-pages",
    "--disable-sync",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--metrics-recording-only",
    "--no-pings",
    "--password-store=basic",
    "--use-mock-keychain",
    "--mute-audio",
    # No spare renderer kept warm: the child shows one page at a time. No autofill queries: a
    # story with a form field made the browser itself ask content-autofill.googleapis.com,
    # blocked and logged as if the story had.
    "--disable-features=Translate,MediaRouter,OptimizationHints,DialMediaRouteProvider,"
    "SpareRendererForSitePerProcess,AutofillServerCommunication",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    # Compositing (done by the CPU: `--disable-gpu`) in the browser's own process, not a GPU
    # process of its own: one process and its IPC fewer, ~12 % less CPU per story (measured on
    # 60 stories, 103 -> 91 ms), and the same bytes (84 of 84 fixture shots).
    "--in-process-gpu",
    # WebRTC's UDP through a proxy only, for the headless shell, which reads no profile
    # preferences (`PREFERENCES`, which the full browser needs: this switch alone let its STUN
    # through). Without it the shell sent STUN and TURN datagrams from a browser that shares the
    # host's network (tests/processes/test_containment.py).
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
)

#: The page is never treated as hidden: its timers, frames and renderer run at full speed.
UNTHROTTLED = (
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    "--disable-renderer-backgrounding",
    "--disable-hang-monitor",
    "--disable-ipc-flooding-protection",
)

#: Pixels that depend on the build only.
PIXELS = (
    "--disable-field-trial-config",
    "--font-render-hinting=none",
    "--disable-font-subpixel-positioning",
    "--disable-lcd-text",
    "--force-color-profile=srgb",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
    "--disable-gpu",
    "--disable-gpu-rasterization",
    "--disable-partial-raster",
    "--disable-skia-runtime-opts",
    "--disable-checker-imaging",
    # Animations run on the page's main thread only. A transform animation the compositor had
    # begun keeps a layer of its own once paused, drawn filtered, or not, by when the pause
    # came: the same frozen spinner gave two images from run to run (measured: 14 of 30).
    "--disable-threaded-animation",
    "--lang=en-US",
    # What headless Chromium reports for hover and pointer media queries, fixed (as Playwright's
    # own launcher does): a mouse-like fine pointer that can hover.
    "--blink-settings=primaryHoverType=2,availableHoverTypes=2,"
    "primaryPointerType=4,availablePointerTypes=4",
)


def chromium_flags(profile: Path, *, as_root: bool) -> list[str]:
    """Every switch, for a browser whose profile is `profile` (a folder of its own)."""
    flags = [*PROCESS, f"--user-data-dir={profile}", *UNTHROTTLED, *PIXELS]
    if as_root:
        flags.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    # No first tab: the child opens its own page per job, and a blank tab's renderer costs
    # ~60 MB of PSS for nothing (measured).
    flags.append("--no-startup-window")
    # A capture page draws only the frames the renderer begins (`child.browser.pages`): each
    # must hold every stage of the page's rendering when it is drawn, not the last one's.
    flags.append("--run-all-compositor-stages-before-draw")
    return flags


#: The profile's preferences: WebRTC sends UDP through a proxy only (and a page's proxy takes no
#: UDP), so no STUN or TURN datagram of a story's leaves the browser.
PREFERENCES = {"webrtc": {"ip_handling_policy": "disable_non_proxied_udp"}}


def write_preferences(profile: Path) -> None:
    """`PREFERENCES` where Chromium reads them at start, in the profile `profile`."""
    folder = profile / "Default"
    folder.mkdir(exist_ok=True)
    (folder / "Preferences").write_text(json.dumps(PREFERENCES))
