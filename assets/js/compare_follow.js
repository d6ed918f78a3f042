// Compare's A follows the run shown: each run the page shows (a run finished, a link, an example, a tour stop, a
// branch opened) sets A to its SPEC (scrub.js's 'um-run' event carries it), unless the visitor has typed in A
// since; then A keeps theirs and the note beside it says so, until "A: the run shown" follows the run again.
// One state for the page: were the note drawn again, its script runs again and must not listen twice.
const followA = window.__umCompareA || (window.__umCompareA = {typed: null, note: null, bound: false});
followA.note = element;
const specA = () => document.querySelector('#spec-a textarea, #spec-a input');
function say() {     // `typed`: what the visitor typed in A, while it is still there
  followA.note.textContent = followA.typed === null ? '' : 'A keeps what you typed and no longer follows the run ' +
    'shown; “A: the run shown” follows it again.';
}
function mine(a) {   // the server may replace A (a model picked that the run shown is not on): theirs is gone
  if (followA.typed !== null && a && a.value !== followA.typed) { followA.typed = null; say(); }
  return followA.typed !== null;
}
function followRun(run) {
  const a = specA();
  if (mine(a) || !a || !run || !run.spec || a.value === run.spec) return;
  a.value = run.spec;
  a.dispatchEvent(new Event('input', {bubbles: true}));    // gradio's copy of the value; not trusted, not "by hand"
}
if (!followA.bound) {
  followA.bound = true;
  document.addEventListener('input', (e) => {
    if (e.isTrusted && e.target === specA()) { followA.typed = e.target.value; say(); }
  });
  document.addEventListener('click', (e) => {
    if (e.target.closest && e.target.closest('#compare-shown')) { followA.typed = null; say(); }
  });
  document.addEventListener('um-run', (e) => followRun(e.detail));
  // gradio sets the box's value as a property, with no event and no DOM change to observe: while A is the
  // visitor's it is read once a second, so the note goes when the server has replaced their text
  setInterval(() => { if (followA.typed !== null) mine(specA()); }, 1000);
}
say();
followRun(window.__umScrub && window.__umScrub.run);     // a run shown before this script ran
