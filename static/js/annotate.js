// The annotation workspace: keyboard shortcuts, and the time spent on each label.
// Time spent is the time since the annotator's previous save on this page (or since the page opened): steps are
// labelled one after the other, so that is the time the step took. The server adds it up over re-labels.
(function () {
  "use strict";
  const list = document.getElementById("annotate-steps");
  if (!list) return;
  const steps = Array.from(list.querySelectorAll("li.step"));
  let since = performance.now();

  function typing(target) {
    return target.matches("input:not([type=radio]), textarea, select");
  }
  function current() {
    return document.activeElement.closest ? document.activeElement.closest("li.step") : null;
  }
  function focusStep(offset) {
    const here = steps.indexOf(current());
    const next = steps[Math.min(Math.max(here + offset, 0), steps.length - 1)];
    if (next) next.focus();
  }

  // Capture phase: runs before htmx reads the form, so the hidden field goes out with this save.
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (!list.contains(form)) return;
    const now = performance.now();
    form.querySelector("input[name=seconds_spent]").value = String(Math.round((now - since) / 1000));
    since = now;
  }, true);

  list.addEventListener("change", function (event) {
    if (event.target.matches("input[type=radio]")) event.target.form.requestSubmit();
    // Autosave a comment too, once the step has a label to go with it (a comment alone is not a label).
    else if (event.target.matches("input[name=comment]") && event.target.form.querySelector("input[type=radio]:checked")) {
      event.target.form.requestSubmit();
    }
  });

  // In the comment field: Enter saves (the form's own submit), Escape goes back to the step for the keys.
  list.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && event.target.matches("input[name=comment]")) {
      event.target.closest("li.step").focus();
      event.preventDefault();
    }
  });

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    const step = current();
    if (event.key === "j" || event.key === "ArrowDown") { focusStep(1); event.preventDefault(); }
    else if (event.key === "k" || event.key === "ArrowUp") { focusStep(-1); event.preventDefault(); }
    else if (event.key === "c" && step) { step.querySelector("input[name=comment]").focus(); event.preventDefault(); }
    else if (/^[1-9]$/.test(event.key) && step) {
      const radio = step.querySelectorAll("input[type=radio]")[Number(event.key) - 1];
      if (radio) {
        radio.checked = true;
        radio.form.requestSubmit();
        focusStep(1);
        event.preventDefault();
      }
    } else if (event.key === "n" || event.key === "p") {
      const link = document.querySelector("a[data-key=" + event.key + "]");
      if (link) window.location.href = link.href;
    }
  });

  // Start on the first step without a label.
  const first = steps.find(function (li) { return !li.querySelector("input[type=radio]:checked"); }) || steps[0];
  if (first) first.focus();
})();
