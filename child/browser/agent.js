// The capture's agent inside the page: installed before any script of the build runs (an init
// script), it seeds Math.random, follows Storybook's channel and answers the child's questions.
// Every answer is a plain value: the child polls it with a timeout (a hung page cannot answer,
// and the child must not wait on it), so nothing here waits longer than the child asked.
(() => {
  'use strict';

  // Math.random, seeded: the same sequence on every host, restarted when each story starts
  // rendering (its `loading` phase), so that a story draws the same numbers whether it opened
  // the page or was switched to, and whatever was shown before it.
  const SEED = 0x5eed1e55;
  let seed = SEED;
  const random = () => {
    // mulberry32: a small 32-bit generator, plenty for stories that draw a few numbers.
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  Object.defineProperty(Math, 'random', { value: random, configurable: true, writable: true });

  const errors = [];
  const describe = (error) => {
    if (error && typeof error === 'object') {
      const name = error.name || 'Error';
      return error.message ? `${name}: ${error.message}` : String(name);
    }
    return String(error);
  };
  window.addEventListener('error', (event) => errors.push(describe(event.error || event.message)));
  window.addEventListener('unhandledrejection', (event) => errors.push(describe(event.reason)));

  // The story being shown, and what Storybook said about it since it was asked for.
  // `shownAt` is the page's time (held by the child's clock) when the story was asked for.
  const fresh = (storyId) => ({
    storyId,
    shownAt: performance.now(),
    rendered: false,
    finished: false,
    unchanged: false,
    error: null,
  });
  // The element Storybook renders every story into, as the page's markup gives it (Storybook 7
  // and later: #storybook-root; 6.5: #root). A story that removes it leaves a page on which every
  // later story fails: the child then opens a fresh one (`whole`).
  let rootId = null;
  document.addEventListener('DOMContentLoaded', () => {
    rootId = ['storybook-root', 'root'].find((id) => document.getElementById(id)) || null;
  });

  const initialId = new URLSearchParams(location.search).get('id');
  let story = fresh(initialId);

  // `Date` starts every story at the same instant, the capture's (`__storyshelfEpoch`, ms since
  // the epoch, set by the child for a page whose clock it holds), when the story starts
  // rendering, as Math.random's seed does: from there it moves with the held clock, so a
  // tween timed by `Date.now()` ends as one timed by `performance.now`, and a story shows the
  // same date whether it opened the page or was switched to, whatever was shown before it.
  const restartDate = () => {
    const epoch = window.__storyshelfEpoch;
    if (typeof epoch !== 'number') return;
    for (const view of views()) {
      if (view.__pwClock) view.__pwClock.controller.setSystemTime(epoch);
    }
  };

  // What an earlier story left on the page outside the story's root: an element on <body>
  // that was there when this story was asked for and is still there at its shot, and that the
  // preview did not have before its first story (a toast of antd's static `message`, whose
  // container outlives the story that showed it, and its dismissal on a timer of that story).
  // Such a story would look otherwise on a page of its own: the child takes it again on one.
  let previewChildren = null;
  let leftBehind = [];
  // The most elements `portalBox` looks at: a portal of a table of thousands of rows is seen
  // by its first elements (its container and the rows' tops) well before this.
  const PORTAL_NODES = 5000;
  const strays = () => {
    const body = document.body;
    if (!body) return [];
    if (previewChildren === null) previewChildren = new Set(body.children);
    return [...body.children].filter((element) => !previewChildren.has(element));
  };
  // Where a node is drawn that a shot can see it, [left, top, right, bottom] in page
  // coordinates, on a page of `width` x `height`: a box of some size on the page, visible
  // (recharts' measuring span, 20,000 px above the page, is not); null when it is not.
  const seenBox = (node, width, height) => {
    const box = node.getBoundingClientRect();
    const left = box.left + window.scrollX;
    const top = box.top + window.scrollY;
    if (!(box.width > 0 && box.height > 0)) return null;
    if (left >= width || top >= height || left + box.width <= 0 || top + box.height <= 0) return null;
    const style = getComputedStyle(node);
    if (style.visibility === 'hidden' || style.opacity === '0') return null;
    return [left, top, left + box.width, top + box.height];
  };
  // Whether an element or one inside it is drawn where a shot can see it.
  const drawn = (element) => {
    const [width, height] = agent.pageSize();
    const seen = (node) => seenBox(node, width, height) !== null;
    return seen(element) || [...element.querySelectorAll('*')].some(seen);
  };

  const fail = (message) => {
    if (story.error === null) story.error = message;
  };
  // Events that name their story are ignored when they name another (a late event of the story
  // shown before); the error events name none and always come before their story finishes.
  const ofThisStory = (id) => id === undefined || id === null || id === story.storyId;
  const handlers = {
    storyRenderPhaseChanged: (change) => {
      if (change && change.newPhase === 'loading' && ofThisStory(change.storyId)) {
        strays();  // the preview's own children, known before its first story adds any
        seed = SEED;
        restartDate();
      }
    },
    storyRendered: (id) => { if (ofThisStory(id)) story.rendered = true; },
    storyFinished: (result) => {
      sawFinished = true;
      if (ofThisStory(result && result.storyId)) story.finished = true;
    },
    storyUnchanged: (id) => { if (ofThisStory(id)) story.unchanged = true; },
    storyMissing: (id) => {
      if (ofThisStory(id)) fail(`story ${id || story.storyId} is not in the build`);
    },
    storyErrored: (error) => {
      const title = (error && error.title) || 'Error';
      const description = error && error.description ? `: ${error.description}` : '';
      fail(`${title}${description}`);
    },
    storyThrewException: (error) => fail(describe(error)),
    playFunctionThrewException: (error) => fail(`play function: ${describe(error)}`),
    unhandledErrorsWhilePlaying: (list) => {
      const first = Array.isArray(list) && list.length ? list[0] : list;
      fail(`play function: unhandled ${describe(first)}`);
    },
  };

  // What the page's scripts asked for and do not have yet: each fetch() until it settles and
  // each read of a response's body until it ends, each XMLHttpRequest from send() to loadend.
  // The driver's request events say it of most requests, but never of a data: URL (an icon
  // or a story's data inlined), and they come to the child by another road than the page's
  // answers, so a request the page made just before an answer may be told after it; the
  // page's own count cannot be late. `assetsReady` waits for it to be none.
  // Each with when it began, in real time (`performance.now` as the page had it before the
  // held clock replaced it).
  const realNow = performance.now.bind(performance);
  const scripted = new Map();
  let tokens = 0;
  const begin = () => {
    tokens += 1;
    scripted.set(tokens, realNow());
    return tokens;
  };
  const counted = (promise) => {
    const token = begin();
    const done = () => { scripted.delete(token); };
    promise.then(done, done);
    return promise;
  };
  const realFetch = window.fetch;
  if (typeof realFetch === 'function') {
    window.fetch = function fetch(...args) {
      return counted(Reflect.apply(realFetch, window, args));
    };
  }
  if (typeof Response === 'function') {
    for (const name of ['arrayBuffer', 'blob', 'bytes', 'formData', 'json', 'text']) {
      const read = Response.prototype[name];
      if (typeof read !== 'function') continue;
      Response.prototype[name] = function (...args) {
        return counted(Reflect.apply(read, this, args));
      };
    }
  }
  if (typeof XMLHttpRequest === 'function') {
    const send = XMLHttpRequest.prototype.send;
    XMLHttpRequest.prototype.send = function (...args) {
      const token = begin();
      const done = () => { scripted.delete(token); };
      this.addEventListener('loadend', done, { once: true });
      try {
        return Reflect.apply(send, this, args);
      } catch (error) {
        done(); // refused, or a synchronous one that failed: no loadend may come
        throw error;
      }
    };
  }

  // The build's service workers (MSW's, most often): a page may have `MAX_WORKERS` of them,
  // one a scope; a story that registers more fails, and the registration past the limit is
  // refused before the browser fetches its script (a story that registered a thousand held
  // the browser's memory until the build ended). Registrations are kept, to say what a story
  // that never finished was waiting on (`waitingOn`).
  const MAX_WORKERS = 8;
  const registrations = new Map();
  const container = window.ServiceWorkerContainer && window.ServiceWorkerContainer.prototype;
  if (container && typeof container.register === 'function') {
    const register = container.register;
    container.register = function (script, options) {
      const scope = String((options && options.scope) || '.');
      const key = new URL(scope, new URL(String(script), location.href)).href;
      if (!registrations.has(key) && registrations.size >= MAX_WORKERS) {
        const message = `the story registered more than ${MAX_WORKERS} service workers`;
        fail(message);
        return Promise.reject(new Error(message));
      }
      const registering = Reflect.apply(register, this, [script, options]);
      registrations.set(key, { script: String(script), registration: null });
      registering.then((registration) => {
        registrations.set(key, { script: String(script), registration });
      }, () => registrations.delete(key));
      return registering;
    };
  }

  // Whether a story stored anything a page keeps past it beyond localStorage and
  // sessionStorage (which `show` empties itself): a cookie, IndexedDB, Cache Storage. The
  // child then empties the origin's storage before the next story (`show` answers 'stored').
  let stored = false;
  const noting = (holder, name) => {
    const method = holder && holder[name];
    if (typeof method !== 'function') return;
    holder[name] = function (...args) {
      stored = true;
      return Reflect.apply(method, this, args);
    };
  };
  if (window.IDBFactory) noting(IDBFactory.prototype, 'open');
  if (window.CacheStorage) noting(CacheStorage.prototype, 'open');
  const cookie = Object.getOwnPropertyDescriptor(Document.prototype, 'cookie');
  if (cookie && cookie.set) {
    Object.defineProperty(Document.prototype, 'cookie', {
      configurable: true,
      enumerable: cookie.enumerable,
      get() { return cookie.get.call(this); },
      set(value) { stored = true; cookie.set.call(this, value); },
    });
  }
  const forget = () => {
    for (const storage of [window.localStorage, window.sessionStorage]) {
      try {
        if (storage && storage.length) storage.clear();
      } catch (_) {
        // Storage the page may not use.
      }
    }
  };

  // The page's timers are the held clock's (installed after this script); a wait of the
  // child's (`outcomeWithin`) runs on real time, and ends early at Storybook's next word on the
  // story (`wake`).
  const realSetTimeout = window.setTimeout.bind(window);
  let wake = null;

  let channel;
  let hooked = null;
  // 'none', 'waiting' or 'ready' (or 'failed'): the preview's initialisation (`previewReady`).
  let previewState = 'none';
  // What a page loaded ahead of its stories loads before the first (`loadedAhead`): null until
  // started, then false, then true once done.
  let loaded = null;
  const hook = (value) => {
    if (!value || hooked === value || typeof value.on !== 'function') return;
    hooked = value;
    for (const [name, handler] of Object.entries(handlers)) {
      value.on(name, (...args) => {
        handler(...args);
        if (wake) wake();
      });
    }
  };
  // Hooked the moment Storybook installs its channel, before it renders the first story.
  try {
    Object.defineProperty(window, '__STORYBOOK_ADDONS_CHANNEL__', {
      configurable: true,
      enumerable: true,
      get: () => channel,
      set: (value) => { channel = value; hook(value); },
    });
  } catch (_) {
    // A page that defined it first: hooked when a story is asked for.
  }

  // Storybook 8.4 and later say `storyFinished` once a story, its play function and its
  // reporters are done; older ones end at `storyRendered` (after the play function since 7.0).
  // Storybook 7 and later name their events in a global; 6.5 has neither the global nor the
  // event. A page that said `storyFinished` once says it for every story.
  let sawFinished = false;
  const finishes = () => {
    if (sawFinished) return true;
    const events = window.__STORYBOOK_MODULE_CORE_EVENTS__;
    return Boolean(events && typeof events === 'object' && 'STORY_FINISHED' in events);
  };

  const STYLE_ID = 'storyshelf-capture-style';
  const STYLE = [
    '*, *::before, *::after { caret-color: transparent !important; }',
    'html { scroll-behavior: auto !important; }',
  ].join('\n');

  // A document and every shadow root in it (the page's own, unless another is given).
  const roots = (page = document) => {
    const found = [page];
    const walk = (node) => {
      for (const element of node.querySelectorAll('*')) {
        if (element.shadowRoot) {
          found.push(element.shadowRoot);
          walk(element.shadowRoot);
        }
      }
    };
    walk(page);
    return found;
  };

  // The preview's globals as the page first had them (but for the accessibility checks, below),
  // and the keys a mode set since: each story gets the first with its own mode's over them, so
  // a mode's theme never leaks into the next story. `ownSent` is whether the preview holds them.
  let ownGlobals = null;
  let ownSent = true;
  let modeKeys = [];
  const globalsHolder = () => {
    const preview = window.__STORYBOOK_PREVIEW__;
    const store = preview && preview.storyStoreValue;
    const legacy = window.__STORYBOOK_STORY_STORE__;
    const holder = (store && store.userGlobals) || (legacy && legacy.globals);
    return holder && typeof holder.get === 'function' ? holder : null;
  };
  // Storybook's accessibility addon (addon-a11y 8.3 and later) runs axe over every story once
  // it rendered, and Storybook says the story finished only after: 10 to 18 ms of the page's
  // time a story on svelte-sb8 and vue-sb9, for a report nothing here reads. axe reads the
  // page and draws nothing, so the capture turns the automatic run off as the addon's own
  // toolbar does, with its global `a11y.manual`, where the preview has that global.
  const withoutAutomaticChecks = (globals) => {
    const a11y = globals.a11y;
    if (!a11y || typeof a11y !== 'object' || a11y.manual === true) return globals;
    return { ...globals, a11y: { ...a11y, manual: true } };
  };
  // '' when nothing was to change, 'updated' when the globals were sent (Storybook then renders
  // the story shown again), else why they cannot be.
  const applyGlobals = (wanted) => {
    const keys = Object.keys(wanted);
    const holder = globalsHolder();
    if (ownGlobals === null && holder) {
      const preview = { ...holder.get() };
      ownGlobals = withoutAutomaticChecks(preview);
      ownSent = ownGlobals === preview;
    }
    if (!keys.length && !modeKeys.length && ownSent) return '';
    if (!holder) return 'the preview keeps no globals a mode could set';
    const next = { ...ownGlobals };
    for (const key of modeKeys) if (!(key in ownGlobals)) next[key] = undefined;
    Object.assign(next, wanted);
    modeKeys = keys;
    ownSent = true;
    hooked.emit('updateGlobals', { globals: next });
    return 'updated';
  };

  // This window and every frame below it that the page can reach (a frame of another origin
  // cannot be loaded here: only the build is served).
  const views = () => {
    const found = [];
    const walk = (view) => {
      try {
        view.document;  // throws for a frame of another origin
        found.push(view);
        for (let i = 0; i < view.frames.length; i += 1) walk(view.frames[i]);
      } catch (_) {
        // Nothing of the story's runs there.
      }
    };
    walk(window);
    return found;
  };

  // Playwright's fake clock (`page.clock`) of each of them.
  const clocks = () => {
    if (!window.__pwClock) {
      throw new Error('the page holds no clock: this Playwright keeps its fake clock elsewhere');
    }
    return views().filter((view) => view.__pwClock).map((view) => view.__pwClock.controller);
  };

  // Every story file of the build imported, one after another in the index's order, and the
  // fonts the page's styles declare for Latin text loaded: what a page loaded ahead of its
  // stories loads before the first. A page imports a story's file when it first shows one of
  // its stories, and a font when a story first uses it, and each such request then costs that
  // story a quiet window (sanity-ui-sb7: 130-280 ms for a story that loaded a file or a font,
  // against 30). The files one after another, not all at once as Storybook's
  // `cacheAllCSFFiles` does (the plan's page, through `extract()`): a file that adds styles or
  // registers components as it is evaluated then leaves the same page whichever shard the
  // child takes and whichever file arrives first (all at once, shoelace-sb65's icon gallery
  // differed from run to run). A file that fails to import is left to fail its own stories, as
  // it would when shown (the browser keeps its error for every import of it); a font that
  // fails, to fail as it would. Fonts only for Latin text: a font cut into a hundred
  // unicode-range slices (a CJK family) is loaded slice by slice as stories need them.
  const ahead = async () => {
    const preview = window.__STORYBOOK_PREVIEW__;
    const store = (preview && preview.storyStoreValue) || window.__STORYBOOK_STORY_STORE__;
    const index = store && store.storyIndex && store.storyIndex.entries;
    if (index && typeof store.loadCSFFileByStoryId === 'function') {
      const seen = new Set();
      for (const entry of Object.values(index)) {
        if ((entry.type && entry.type !== 'story') || seen.has(entry.importPath)) continue;
        seen.add(entry.importPath);
        try {
          await store.loadCSFFileByStoryId(entry.id);
        } catch (_) {
          // Its stories fail with the error when shown.
        }
      }
    }
    const loads = [];
    document.fonts.forEach((face) => {
      if (face.status === 'unloaded' && coversLatin(face.unicodeRange)) {
        loads.push(face.load().catch(() => null));
      }
    });
    await Promise.all(loads);
  };
  // Whether a `unicode-range` ("U+0-10FFFF", "U+0000-00FF, U+0131", "U+4??") takes in 'a'.
  const coversLatin = (range) => String(range || 'U+0-10FFFF').split(',').some((part) => {
    const [low, high = low] = part.trim().replace(/^U\+/i, '').split('-');
    const from = parseInt(low.replace(/\?/g, '0'), 16);
    const to = parseInt(high.replace(/\?/g, 'F'), 16);
    return from <= 0x61 && 0x61 <= to;
  });

  const agent = {
    errors,

    // Run the page's held clock forward by `ms`, firing every timer due on the way, in order,
    // in every frame, as `page.clock.run_for` does: the same clock's own `runFor`, asked of it
    // here so that the run and the look after it are one round trip (`after`). Answers the
    // first error a timer of the story threw (every due timer has still fired), else null.
    async run(ms) {
      let threw = null;
      for (const controller of clocks()) {
        try {
          await controller.runFor(ms);
        } catch (error) {
          if (threw === null) threw = describe(error);
        }
      }
      return threw;
    },

    // The clock run forward by `ms` (not at all for 0), then the answer of `method(...args)`:
    // {answer, threw}, `threw` as `run` says it.
    async after(ms, method, ...args) {
      const threw = ms > 0 ? await agent.run(ms) : null;
      return { answer: await agent[method](...args), threw };
    },

    // Run the clock on while the page has a timer due within `horizon` ms of the last one
    // that fired, up to `limit` ms in all: as far as the story's motion goes (a tween's
    // frames, a transition's end, a handler's delay), and not on to a timer set for later, a
    // toast's dismissal among them (antd's message waits 3 s, a snackbar 4 to 6): transient
    // UI a story shows stays in its shot. A loop that never ends runs to `limit`. Answers the
    // ms it ran and the first error a timer threw, as `run` says it.
    async settle(limit, horizon) {
      let ran = 0;
      let threw = null;
      while (ran < limit) {
        const due = agent.nextDue();
        if (due === null || due > horizon) break;
        const step = Math.min(Math.max(due, 1), limit - ran);
        const error = await agent.run(step);
        threw = threw || error;
        ran += step;
      }
      return { ran, threw };
    },

    // How many ms from now the page's first timer (an animation frame among them) is due, in
    // any frame; null with none. Read from the fake clock's own timers: a clock that keeps
    // them elsewhere says 0, and `settle` then runs to its limit, as a fixed run did.
    nextDue() {
      let first = null;
      for (const controller of clocks()) {
        const timers = controller._timers;
        const now = controller._now && controller._now.ticks;
        if (!(timers instanceof Map) || typeof now !== 'number') return 0;
        for (const timer of timers.values()) {
          const due = timer.callAt - now;
          if (first === null || due < first) first = due;
        }
      }
      return first;
    },

    // `settle`, then whether fonts and images are ready (`assetsReady`): one round trip.
    async settled(limit, horizon, heldOpen) {
      const { ran, threw } = await agent.settle(limit, horizon);
      return { ran, threw, ready: agent.assetsReady(heldOpen) };
    },

    // Whether a timer is due within `horizon` ms (`settle` has more to run).
    dueWithin(horizon) {
      const due = agent.nextDue();
      return due !== null && due <= horizon;
    },

    // What a story that did not finish may be waiting on: the service workers registered on
    // the page that have not activated, by script.
    waitingOn() {
      const pending = [];
      for (const { script, registration } of registrations.values()) {
        if (!registration || !registration.active) pending.push(script);
      }
      return pending;
    },

    // Show `storyId`: switched to through the channel, or rendered again (same story), under
    // the preview's own globals with `globals` (a Chromatic mode's) over them.
    // What the story before it stored is gone (localStorage and sessionStorage emptied here;
    // 'stored' when it also kept a cookie, IndexedDB or Cache Storage, which the child empties
    // before it asks again with `cleared`): a story sees the same storage whatever was shown
    // before it. `Date` starts again (`restartDate`), for a Storybook that says no phases.
    show(storyId, remount, globals, cleared) {
      hook(window.__STORYBOOK_ADDONS_CHANNEL__);
      if (!hooked) return 'Storybook has no channel in this page';
      if (stored && !cleared) return 'stored';
      stored = false;
      forget();
      leftBehind = strays();
      restartDate();
      const applied = applyGlobals(globals || {});
      if (applied && applied !== 'updated') return applied;
      story = fresh(storyId);
      if (remount && applied === 'updated') return '';  // rendered again under the new globals
      if (remount) hooked.emit('forceRemount', { storyId });
      else hooked.emit('setCurrentStory', { storyId, viewMode: 'story' });
      return '';
    },

    // null while the story renders; then {ok: true, elapsed} (the page's time since the story
    // was asked for), or {error, finished} (the child gives a story that reported an error a
    // moment to finish, by its own clock: the page's is held).
    outcome() {
      if (story.error !== null) return { error: story.error, finished: story.finished };
      const done = story.finished || story.unchanged || (story.rendered && !finishes());
      return done ? { ok: true, elapsed: performance.now() - story.shownAt } : null;
    },

    // `outcome()` once the story is done (rendered, or its error final), else after Storybook's
    // next word on it or `ms` of real time, whichever comes first: one call where a wait and a
    // look were two, and no wait past the moment the story is done.
    async outcomeWithin(ms) {
      const now = agent.outcome();
      if (now !== null && (now.ok || now.finished)) return now;
      await new Promise((resolve) => {
        wake = resolve;
        realSetTimeout(resolve, ms);
      });
      wake = null;
      return agent.outcome();
    },

    // Whether the page has what its stories would otherwise each load as they come (`ahead`),
    // loaded; started at the first call, once the preview is initialised (`previewReady`).
    loadedAhead() {
      if (loaded === null) {
        loaded = false;
        ahead().finally(() => { loaded = true; });
      }
      return loaded;
    },

    // Whether a page loaded with no story (ahead of the stories to come) can be switched to one:
    // Storybook's channel hooked and its preview initialised (`ready()`, Storybook 8 and later;
    // the story store's initialisation, 7). Polled; the wait is started once.
    previewReady() {
      hook(window.__STORYBOOK_ADDONS_CHANNEL__);
      if (!hooked) return false;
      if (previewState === 'none') {
        const preview = window.__STORYBOOK_PREVIEW__;
        const store = window.__STORYBOOK_STORY_STORE__;
        const waited = preview && typeof preview.ready === 'function'
          ? preview.ready()
          : store && store.initializationPromise;
        if (!waited) return false;
        previewState = 'waiting';
        Promise.resolve(waited).then(
          () => { previewState = 'ready'; },
          () => { previewState = 'failed'; },
        );
      }
      return previewState === 'ready';
    },

    // Whether fonts and images have all loaded (a blocked image counts: it failed at once), and
    // what the page's scripts fetched has come (`scripted`), but for what has waited
    // `heldOpen` ms of real time or more: a page run by a service worker (MSW's) may hold a
    // fetch open for good on purpose (a loading story's `delay('infinite')`). A lazy image is
    // made eager: the shot may cover more than the viewport, where it would otherwise never
    // load.
    assetsReady(heldOpen = null) {
      const since = typeof heldOpen === 'number' ? realNow() - heldOpen : -Infinity;
      let waiting = false;
      for (const began of scripted.values()) waiting = waiting || began > since;
      let ready = !waiting && (!document.fonts || document.fonts.status === 'loaded');
      for (const root of roots()) {
        for (const image of root.querySelectorAll('img')) {
          if (image.complete) continue;
          if (image.loading === 'lazy') image.loading = 'eager';
          ready = false;
        }
      }
      return ready;
    },

    // Pause every animation and transition: at its end, or at its first frame. An animation
    // that never ends (infinite iterations) is paused at its first frame either way. SVG
    // animations (SMIL) are paused at `svgSeconds` into their timeline (at the end of any that
    // end sooner), videos and audio at their first frame, as Chromatic does.
    freeze(atEnd, svgSeconds) {
      for (const view of views()) {
        const page = view.document;
        if (!page.getElementById(STYLE_ID) && page.head) {
          const style = page.createElement('style');
          style.id = STYLE_ID;
          style.textContent = STYLE;
          page.head.appendChild(style);
        }
        // The caret blinks in real time. The style above reaches no shadow root, and a field's
        // own caret colour would win over it: every field's is set on the field itself.
        for (const root of roots(page)) {
          for (const field of root.querySelectorAll('input, textarea, [contenteditable]')) {
            field.style.setProperty('caret-color', 'transparent', 'important');
          }
        }
      }
      let paused = 0;
      for (const root of roots()) {
        for (const animation of root.getAnimations ? root.getAnimations() : []) {
          const effect = animation.effect;
          if (!effect) continue;
          const timing = effect.getComputedTiming();
          const start = Math.max(0, Number(effect.getTiming().delay) || 0);
          const end = Number(timing.endTime);
          animation.pause();
          animation.currentTime = atEnd && Number.isFinite(end) ? end : start;
          paused += 1;
        }
        for (const svg of root.querySelectorAll('svg')) {
          if (svg.ownerSVGElement || typeof svg.pauseAnimations !== 'function') continue;
          svg.pauseAnimations();
          svg.setCurrentTime(atEnd ? svgSeconds : 0);
          paused += 1;
        }
        for (const media of root.querySelectorAll('video, audio')) {
          media.autoplay = false;
          if (!media.paused) media.pause();
          if (media.currentTime !== 0) media.currentTime = 0;
          paused += 1;
        }
      }
      return paused;
    },

    // The boxes of the elements `selectors` match (in every shadow root too), in page
    // coordinates, whole pixels around each: [left, top, width, height]; a selector the
    // browser cannot parse is listed in `bad` and matches nothing.
    ignoreBoxes(selectors, limit) {
      const boxes = new Map();
      const bad = [];
      for (const selector of selectors) {
        const found = [];
        try {
          for (const root of roots()) found.push(...root.querySelectorAll(selector));
        } catch (_) {
          bad.push(selector);
          continue;
        }
        for (const element of found) {
          const box = element.getBoundingClientRect();
          if (!(box.width > 0 && box.height > 0)) continue;
          const left = Math.floor(box.left + window.scrollX);
          const top = Math.floor(box.top + window.scrollY);
          const right = Math.ceil(box.right + window.scrollX);
          const bottom = Math.ceil(box.bottom + window.scrollY);
          const key = `${left},${top},${right},${bottom}`;
          if (!boxes.has(key) && boxes.size < limit) {
            boxes.set(key, [left, top, right - left, bottom - top]);
          }
        }
      }
      // With whether the page is whole: asked after every story, in the same call.
      return { boxes: [...boxes.values()], bad, whole: agent.whole() };
    },

    // Whether the page can show another story: the root its markup gave is still there.
    whole() {
      return rootId === null || document.getElementById(rootId) !== null;
    },

    // Everything a shot needs, in one call (each call is a round trip through the driver and
    // the browser): the page frozen (`freeze`), then the story root's box, the scroll offset
    // and the ignore regions (`ignoreBoxes`) as the shot will see them.
    prepare(atEnd, svgSeconds, selectors, limit) {
      agent.freeze(atEnd, svgSeconds);
      return {
        leftover: leftBehind.some((element) => element.isConnected && drawn(element)),
        root: agent.rootBox(),
        portals: agent.portalBox(),
        scroll: [Math.floor(window.scrollX), Math.floor(window.scrollY)],
        page: agent.pageSize(),
        ignore: agent.ignoreBoxes(selectors, limit),
      };
    },

    // The whole page's size, [width, height]: the largest the document and its body say they
    // are (what a whole-page shot covers; Playwright's full-page screenshot measures the same).
    pageSize() {
      const root = document.documentElement;
      const body = document.body || root;
      if (!root) return [0, 0];
      return [
        Math.max(body.scrollWidth, root.scrollWidth, body.offsetWidth, root.offsetWidth,
          body.clientWidth, root.clientWidth),
        Math.max(body.scrollHeight, root.scrollHeight, body.offsetHeight, root.offsetHeight,
          body.clientHeight, root.clientHeight),
      ];
    },

    // The box, in page coordinates and whole pixels, of what this story drew on <body> outside
    // its root: a modal, a drawer, a notification or a menu rendered into a portal (an element
    // the preview did not have before its first story and no earlier story left), so that a
    // shot of the root holds them too; null when there is none. Looks at `PORTAL_NODES`
    // elements at most.
    portalBox() {
      const [width, height] = agent.pageSize();
      let left = Infinity;
      let top = Infinity;
      let right = -Infinity;
      let bottom = -Infinity;
      let looked = 0;
      for (const element of strays()) {
        if (leftBehind.includes(element)) continue;
        for (const node of [element, ...element.querySelectorAll('*')]) {
          if (++looked > PORTAL_NODES) break;
          const box = seenBox(node, width, height);
          if (box === null) continue;
          left = Math.min(left, box[0]);
          top = Math.min(top, box[1]);
          right = Math.max(right, box[2]);
          bottom = Math.max(bottom, box[3]);
        }
      }
      if (!(right > left && bottom > top)) return null;
      const [x, y] = [Math.max(0, Math.floor(left)), Math.max(0, Math.floor(top))];
      return {
        x, y, width: Math.min(width, Math.ceil(right)) - x, height: Math.min(height, Math.ceil(bottom)) - y,
      };
    },

    // The story root's box in page coordinates, whole pixels around it; null without a root.
    rootBox() {
      const root = document.querySelector('#storybook-root') || document.querySelector('#root');
      if (!root) return null;
      const box = root.getBoundingClientRect();
      const left = Math.floor(box.left + window.scrollX);
      const top = Math.floor(box.top + window.scrollY);
      const right = Math.ceil(box.right + window.scrollX);
      const bottom = Math.ceil(box.bottom + window.scrollY);
      return { x: left, y: top, width: right - left, height: bottom - top };
    },
  };
  Object.defineProperty(window, '__storyshelf', { value: agent, configurable: false });
})();
