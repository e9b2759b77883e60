// The adjudication page: choosing a final label saves it at once (as the annotation workspace does); the comment
// goes with it, or on its own when changed after a label was chosen.
(function () {
  "use strict";
  document.addEventListener("change", function (event) {
    const form = event.target.closest("form.adjudication-form");
    if (!form) return;
    if (event.target.matches("input[type=radio]") || form.querySelector("input[type=radio]:checked")) {
      form.requestSubmit();
    }
  });
})();
