"""The command line the child's Chromium runs with, and why each switch is there.

Three concerns: a browser that a child can own (headless, its own profile, a DevTools port, no
first-run or crash-reporting machinery, nothing that phones home), one that never throttles the
page it is driven on (a headless page counts as hidden), and pixels that depend on the build
alone: the same story gives the same bytes on every host. For the last, text is rasterised
without hinting, sub-pixel positioning or LCD anti-aliasing, colours are plain sRGB, raster is
done by the CPU with Skia's baseline code path (its runtime-chosen SIMD paths differ between CPUs,
and Debian's wrapper turns GPU rasterisation on in `/etc/chromium.d`), and the device scale
factor is fixed. Field trials are off so that two hosts never run different feature sets.

The host resolver resolves no name and only 127.0.0.1 is excluded: the page reaches the build's
loopback server and nothing else, even through a request the interception does not see (a
WebSocket). The interception (`child.browser.site`) logs and aborts the rest.
"""

from __future__ import annotations

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
    # No spare renderer kept warm: the child shows one page at a time.
    "--disable-features=Translate,MediaRouter,OptimizationHints,DialMediaRouteProvider,"
    "SpareRendererForSitePerProcess",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
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
    return flags
