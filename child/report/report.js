// The build report's behaviour: the filter, moving between snapshots with the keyboard, the
// overlay's slider and blink, zoom on click, and unchanged images loaded only when asked.
// It drives the markup of render.py and snapshot.py (their classes and data attributes) and
// fetches nothing: the page must open from disk, offline, as one file.
"use strict";

(() => {
  /** How long each image stays up while blinking: long enough to see, short enough to catch a shift. */
  const BLINK_MS = 500;
  /** The largest zoom: enough to count pixels in a small screenshot. */
  const MAX_ZOOM = 8;

  const main = document.querySelector("main");
  const snapshots = Array.from(document.querySelectorAll(".snapshot"));
  const zoom = document.querySelector("dialog.zoom");
  let current = null;

  // The filter: one status at a time, the unstable snapshots, or all.
  const filters = Array.from(document.querySelectorAll("[data-show]"));
  function filter(status) {
    for (const button of filters) {
      button.setAttribute("aria-pressed", String(button.dataset.show === status));
    }
    for (const snapshot of snapshots) {
      const shown = status === "unstable"
        ? snapshot.dataset.unstable === "true"
        : snapshot.dataset.status === status;
      snapshot.hidden = status !== "all" && !shown;
    }
    for (const group of document.querySelectorAll(".group")) {
      const holds = status === "unstable"
        ? group.querySelector('[data-unstable="true"]') !== null
        : group.dataset.group === status;
      group.hidden = status !== "all" && !holds;
    }
  }
  for (const button of filters) {
    button.addEventListener("click", () => filter(button.dataset.show));
  }

  // The current snapshot, and the next or previous one among those the filter shows.
  function mark(snapshot) {
    if (current !== null) {
      current.classList.remove("current");
      current.removeAttribute("aria-current");
    }
    current = snapshot;
    current.classList.add("current");
    current.setAttribute("aria-current", "true");
  }

  function neighbour(step) {
    const start = current === null ? (step > 0 ? -1 : snapshots.length) : snapshots.indexOf(current);
    for (let index = start + step; index >= 0 && index < snapshots.length; index += step) {
      if (!snapshots[index].hidden) return snapshots[index];
    }
    // At the end: stay, unless the current one is filtered out; then the nearest shown one.
    if (current === null || !current.hidden) return null;
    for (let index = start - step; index >= 0 && index < snapshots.length; index -= step) {
      if (!snapshots[index].hidden) return snapshots[index];
    }
    return null;
  }

  function move(step) {
    const next = neighbour(step);
    if (next === null) return;
    mark(next);
    next.focus({ preventScroll: true });
    next.scrollIntoView({ block: "start" });
  }

  main.addEventListener("click", (event) => {
    const snapshot = event.target.closest(".snapshot");
    if (snapshot !== null) mark(snapshot);
  });

  // Side by side or overlaid; the overlay's slider and blink.
  const blinking = new Map();

  function setMode(compare, mode) {
    compare.dataset.mode = mode;
    for (const button of compare.querySelectorAll(".modes button")) {
      button.setAttribute("aria-pressed", String(button.dataset.mode === mode));
    }
    compare.querySelector(".sides").hidden = mode !== "sides";
    const overlay = compare.querySelector(".overlay");
    if (overlay !== null) overlay.hidden = mode !== "overlay";
    if (mode !== "overlay") setBlink(compare, false);
  }

  function setBlink(compare, on) {
    const stack = compare.querySelector(".stack");
    if (stack === null) return;
    clearInterval(blinking.get(stack));
    blinking.delete(stack);
    compare.querySelector(".blink").setAttribute("aria-pressed", String(on));
    const showing = compare.querySelector(".showing");
    if (!on) {
      delete stack.dataset.blink;
      showing.textContent = "baseline left of the line, new right of it";
      return;
    }
    const flip = () => {
      stack.dataset.blink = stack.dataset.blink === "baseline" ? "new" : "baseline";
      showing.textContent = `showing ${stack.dataset.blink}`;
    };
    flip();
    blinking.set(stack, setInterval(flip, BLINK_MS));
  }

  /** Baseline and new drawn at one scale even when their sizes differ, as the diff counts them. */
  function alignStack(stack) {
    const images = Array.from(stack.querySelectorAll("img"));
    if (!images.every((image) => image.complete && image.naturalWidth > 0)) return;
    const widest = Math.max(...images.map((image) => image.naturalWidth));
    stack.style.maxWidth = `${widest * Number(stack.dataset.zoom)}px`;
    for (const image of images) image.style.width = `${(100 * image.naturalWidth) / widest}%`;
  }

  for (const compare of document.querySelectorAll(".compare")) {
    for (const button of compare.querySelectorAll(".modes button")) {
      button.addEventListener("click", () => setMode(compare, button.dataset.mode));
    }
    const stack = compare.querySelector(".stack");
    if (stack === null) continue;
    const reveal = compare.querySelector(".reveal");
    reveal.addEventListener("input", () => stack.style.setProperty("--reveal", `${reveal.value}%`));
    const blink = compare.querySelector(".blink");
    blink.addEventListener("click", () => setBlink(compare, !blinking.has(stack)));
    for (const image of stack.querySelectorAll("img")) {
      image.addEventListener("load", () => alignStack(stack));
    }
  }

  function toggleOverlay(snapshot) {
    const compare = snapshot.querySelector(".compare");
    if (compare === null) return;
    setMode(compare, compare.dataset.mode === "overlay" ? "sides" : "overlay");
  }

  function toggleBlink(snapshot) {
    const compare = snapshot.querySelector(".compare");
    if (compare === null || compare.querySelector(".stack") === null) return;
    if (compare.dataset.mode !== "overlay") setMode(compare, "overlay");
    setBlink(compare, !blinking.has(compare.querySelector(".stack")));
  }

  // Unchanged images: no `src` until asked, so a build of thousands opens at once.
  function showImage(snapshot, shown) {
    const button = snapshot.querySelector("button.show");
    const figure = snapshot.querySelector(".on-demand");
    if (button === null || figure === null) return;
    const image = figure.querySelector("img[data-src]");
    if (shown && image !== null) {
      image.src = image.dataset.src;
      image.removeAttribute("data-src");
    }
    figure.hidden = !shown;
    button.setAttribute("aria-expanded", String(shown));
    button.textContent = shown ? "hide image" : "show image";
  }

  for (const snapshot of snapshots) {
    const button = snapshot.querySelector("button.show");
    if (button === null) continue;
    button.addEventListener("click", () => {
      showImage(snapshot, button.getAttribute("aria-expanded") !== "true");
    });
  }
  for (const button of document.querySelectorAll("button.show-all")) {
    button.addEventListener("click", () => {
      for (const snapshot of button.closest(".group").querySelectorAll(".snapshot")) {
        showImage(snapshot, true);
      }
    });
  }

  // Zoom: the clicked image at 1:1 or larger; from a crop, scrolled to the changed area.
  const zoomFrame = zoom.querySelector(".zoom-frame");
  const zoomImage = zoom.querySelector("img");
  const zoomCaption = zoom.querySelector(".zoom-caption");

  function openZoom(image, title, box) {
    const width = image.naturalWidth;
    const height = image.naturalHeight;
    if (!image.currentSrc || width === 0) return;
    const fits = Math.min((innerWidth * 0.9) / width, (innerHeight * 0.8) / height);
    const factor = Math.max(1, Math.min(MAX_ZOOM, Math.floor(fits)));
    zoomImage.src = image.currentSrc;
    zoomImage.alt = image.alt;
    zoomImage.style.width = `${width * factor}px`;
    zoomCaption.textContent = `${title} (${width}x${height}) at ${factor}:1. Esc or a click closes.`;
    zoom.showModal();
    if (box) {
      const [left, top, boxWidth, boxHeight] = box.split(",").map(Number);
      zoomFrame.scrollLeft = (left + boxWidth / 2) * factor - zoomFrame.clientWidth / 2;
      zoomFrame.scrollTop = (top + boxHeight / 2) * factor - zoomFrame.clientHeight / 2;
    }
  }

  main.addEventListener("click", (event) => {
    const button = event.target.closest(".zoom-in");
    if (button === null) return;
    const image = button.querySelector("img");
    if (image !== null) openZoom(image, button.dataset.title || image.alt, button.dataset.box);
  });
  zoom.addEventListener("click", () => zoom.close());

  // Keys, as the toolbar lists them. A focused slider keeps its arrows.
  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey) return;
    if (zoom.open) return; // the dialog closes itself on Escape
    const arrow = event.key === "ArrowRight" || event.key === "ArrowLeft";
    if (arrow && event.target instanceof HTMLInputElement) return;
    if (event.key === "j" || event.key === "ArrowRight") move(1);
    else if (event.key === "k" || event.key === "ArrowLeft") move(-1);
    else if (event.key === "o" && current !== null) toggleOverlay(current);
    else if (event.key === "b" && current !== null) toggleBlink(current);
    else return;
    event.preventDefault();
  });

  filter("all");
})();
