// Compare's A follows the run shown: each run the page shows (a run finished, a link, an example, a tour stop, a
// branch opened) sets A to its SPEC (scrub.js's 'um-run' event carries it), unless the visitor has typed in A
// since; then A keeps theirs and the note beside it says so, until "A: the run shown" follows the run again.
const specA = () => document.querySelector('#spec-a textarea, #spec-a input');
let typed = null;     // what the visitor typed in A, while it is still there
function say() {
  element.textContent = typed === null ? '' : 'A keeps what you typed and no longer follows the run shown; ' +
    '“A: the run shown” follows it again.';
}
// the server may replace A (a model picked that the run shown is not on: explorer/page/compare.py); gradio sets the
// box's value as a property, with no event and no DOM change to observe, so while A is the visitor's it is read
// once a second: their text gone, A follows runs again
setInterval(() => { const a = specA(); if (typed !== null && a && a.value !== typed) { typed = null; say(); } }, 1000);
function followRun(run) {
  const a = specA();
  if (a && typed !== null && a.value !== typed) { typed = null; say(); }
  if (typed !== null || !a || !run || !run.spec || a.value === run.spec) return;
  a.value = run.spec;
  a.dispatchEvent(new Event('input', {bubbles: true}));    // gradio's copy of the value; not trusted, not "by hand"
}
document.addEventListener('input', (e) => {
  if (e.isTrusted && e.target === specA()) { typed = e.target.value; say(); }
});
document.addEventListener('click', (e) => {
  if (e.target.closest && e.target.closest('#compare-shown')) { typed = null; say(); }
});
document.addEventListener('um-run', (e) => followRun(e.detail));
followRun(window.__umScrub && window.__umScrub.run);     // a run shown before this script loaded
