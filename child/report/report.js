// The build report's behaviour: the filter, moving between snapshots with the keyboard, the
// overlay's slider and blink, zoom on click, unchanged images loaded only when asked, and
// review when the page is served by `serve`.
// It drives the markup of render.py, snapshot.py and review.py (their classes and data
// attributes). The page must open from disk, offline, as one file: it fetches nothing there,
// and only its own server's API when served over HTTP (see "Review" below).
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

  // Review. Opened from disk, or served by a plain web server or a bucket, the page shows the
  // `review` commands to run. Served by `serve`, it asks the server's API for the build as it
  // stands now and redraws the badges from the answer; when the server takes decisions
  // (`review_api: "writable"`) the Accept and Reject buttons replace the commands. The first
  // decision asks for the reviewer's name and the server's token in a small form, kept in
  // sessionStorage (this tab only); each decision is POSTed and the page redrawn from the
  // server's answer, so it shows what was stored. A refused one changes nothing but a message.
  const REVIEWER_KEY = "storyshelf-reviewer";
  const buildId = document.body.dataset.build;
  const reviewBuild = document.querySelector(".review-build");
  const reviewer = reviewBuild === null ? null : reviewBuild.querySelector("form.reviewer");
  const reviewMessage = reviewBuild === null ? null : reviewBuild.querySelector(".review-message");
  const reviewable = new Map(
    Array.from(document.querySelectorAll(".snapshot[data-name]"), (snapshot) => [snapshot.dataset.name, snapshot]),
  );
  let writable = false;
  let sending = false;
  let waiting = null; // the decision the reviewer's form was opened for

  function keptReviewer() {
    try {
      const kept = JSON.parse(sessionStorage.getItem(REVIEWER_KEY) || "null");
      if (kept !== null && typeof kept.by === "string" && typeof kept.token === "string" && kept.by && kept.token) return kept;
    } catch {
      // Storage off (a private window's policy) or unreadable: ask again.
    }
    return null;
  }

  function forgetReviewer() {
    try {
      sessionStorage.removeItem(REVIEWER_KEY);
    } catch {
      // nothing kept
    }
  }

  function setBadge(badge, value, text) {
    badge.classList.remove("pending", "accepted", "rejected");
    if (value) badge.classList.add(value);
    badge.textContent = value ? text : "";
    badge.hidden = !value;
  }

  /** The build's review state and each snapshot's decision, as `build` (the API's JSON) says. */
  function redraw(build) {
    const state = document.querySelector("[data-review-state]");
    if (state !== null) {
      state.dataset.reviewState = build.review || "";
      setBadge(state, build.review, `review ${build.review}`);
    }
    for (const snapshot of build.snapshots || []) {
      const section = reviewable.get(snapshot.name);
      const badge = section === undefined ? null : section.querySelector("[data-decision]");
      if (badge === null) continue;
      badge.dataset.decision = snapshot.review || "";
      setBadge(badge, snapshot.review, snapshot.review);
    }
  }

  /** A line under the decision asked for: what was recorded, or why not. */
  function say(where, text, problem) {
    where.append(reviewMessage);
    reviewMessage.textContent = text;
    reviewMessage.classList.toggle("problem", problem);
    reviewMessage.hidden = false;
  }

  function disable(on) {
    for (const button of document.querySelectorAll("[data-decide], .accept-all")) button.disabled = on;
  }

  /** `verb` ("accept" or "reject") on `names` (null: every changed and new snapshot), asked
   * from `where` (the snapshot's review line, or the build's), where the form and message go. */
  function decide(verb, names, where) {
    if (!writable || sending) return;
    const who = keptReviewer();
    if (who === null) {
      waiting = { verb, names, where };
      where.append(reviewer);
      reviewer.hidden = false;
      reviewer.elements.by.focus();
      return;
    }
    send(verb, names, where, who);
  }

  async function send(verb, names, where, who) {
    sending = true;
    disable(true);
    const body = { decision: verb, by: who.by };
    if (names !== null) body.snapshots = names;
    const what = names === null ? "every changed and new snapshot" : names.join(", ");
    try {
      const response = await fetch(`/api/builds/${buildId}/review`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${who.token}` },
        body: JSON.stringify(body),
        cache: "no-store",
      });
      const answer = await response.json().catch(() => ({}));
      if (response.ok) {
        redraw(answer);
        say(where, `${verb === "accept" ? "Accepted" : "Rejected"} ${what}, as ${who.by}.`, false);
        return;
      }
      const why = answer.error || response.statusText;
      if (response.status === 401 || response.status === 403) {
        forgetReviewer();
        say(where, `Not recorded: ${why} (${response.status}). The next decision asks for the token again.`, true);
      } else {
        say(where, `Not recorded: ${why} (${response.status}).`, true);
      }
    } catch (error) {
      say(where, `Not recorded: the server did not answer (${error.message}).`, true);
    } finally {
      sending = false;
      disable(false);
    }
  }

  /** Ask this page's server for the build; show the buttons if it takes decisions. */
  async function connect() {
    if (buildId === undefined || !/^https?:$/.test(location.protocol)) return;
    let answer;
    try {
      const response = await fetch(`/api/builds/${buildId}`, { headers: { Accept: "application/json" }, cache: "no-store" });
      if (!response.ok) return;
      answer = await response.json();
    } catch {
      return; // not served by `serve`: the commands stay
    }
    if (answer === null || String(answer.id) !== buildId || !("review_api" in answer)) return;
    redraw(answer);
    if (reviewBuild === null) return;
    if (answer.review_api !== "writable") {
      reviewBuild.querySelector(".review-read-only").hidden = false;
      return;
    }
    writable = true;
    for (const commands of document.querySelectorAll(".review-commands")) commands.hidden = true;
    for (const shown of document.querySelectorAll(".review-buttons, .review-actions, .review-keys")) shown.hidden = false;
  }

  if (reviewBuild !== null) {
    reviewer.addEventListener("submit", (event) => {
      event.preventDefault();
      const who = { by: reviewer.elements.by.value.trim(), token: reviewer.elements.token.value.trim() };
      if (!who.by || !who.token) return;
      try {
        sessionStorage.setItem(REVIEWER_KEY, JSON.stringify(who));
      } catch {
        // not kept: asked again next time
      }
      reviewer.hidden = true;
      reviewer.elements.token.value = "";
      const decision = waiting;
      waiting = null;
      if (decision !== null) send(decision.verb, decision.names, decision.where, who);
    });
    reviewer.querySelector(".cancel").addEventListener("click", () => {
      reviewer.hidden = true;
      waiting = null;
    });
    reviewBuild.querySelector(".accept-all").addEventListener("click", () => decide("accept", null, reviewBuild));
    for (const [name, snapshot] of reviewable) {
      const line = snapshot.querySelector(".review-snapshot");
      for (const button of snapshot.querySelectorAll("[data-decide]")) {
        button.addEventListener("click", () => decide(button.dataset.decide, [name], line));
      }
    }
  }

  function decideCurrent(verb) {
    if (current === null || current.dataset.name === undefined) return;
    decide(verb, [current.dataset.name], current.querySelector(".review-snapshot"));
  }

  // Keys, as the toolbar lists them. A focused slider keeps its arrows.
  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey) return;
    if (zoom.open) return; // the dialog closes itself on Escape
    if (event.target instanceof Element && event.target.closest("form") !== null) return; // typing
    const arrow = event.key === "ArrowRight" || event.key === "ArrowLeft";
    if (arrow && event.target instanceof HTMLInputElement) return;
    if (event.key === "j" || event.key === "ArrowRight") move(1);
    else if (event.key === "k" || event.key === "ArrowLeft") move(-1);
    else if (event.key === "o" && current !== null) toggleOverlay(current);
    else if (event.key === "b" && current !== null) toggleBlink(current);
    else if (event.key === "a" && writable) decideCurrent("accept");
    else if (event.key === "x" && writable) decideCurrent("reject");
    else return;
    event.preventDefault();
  });

  filter("all");
  connect();
})();
