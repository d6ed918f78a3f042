// The page's first script, before gradio's own (explorer.page.frame_guard puts it there).
// gradio 6.31's status tracker (its chunk "statustracker-<hash>.js") shows an event's elapsed time from a loop of
// animation frames that stops when the event ends; the page's loading tracker is removed while still pending, so its
// loop asks for a frame 60 times a second for as long as the page is open: a drawn frame each time, ~7 % of a core
// in an idle headless Chromium. The tracker's frames only tick its timer (shown to a tenth of a second): they run
// from a 100 ms timer here, which draws nothing. Every other caller gets real frames.
(() => {
  const frame = window.requestAnimationFrame.bind(window), cancel = window.cancelAnimationFrame.bind(window);
  const tracker = /\/statustracker-[^/]*\.js/;
  // a diverted frame's number is its timer's, negated: never a real frame's (those count up from 1), so cancelling
  // it stops that timer and no other caller's frame
  window.requestAnimationFrame = (f) => (tracker.test(new Error().stack || "")
    ? -setTimeout(() => f(performance.now()), 100) : frame(f));
  window.cancelAnimationFrame = (id) => (id < 0 ? clearTimeout(-id) : cancel(id));
})();
