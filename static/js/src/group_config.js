// The group page's pattern form: shows the chosen pattern's fields only,
// and adds rows to the pipeline-stage and sleeptime-trigger formsets.
const form = document.querySelector("[data-pattern-form]");

function showChosen() {
  const chosen = form.querySelector('input[name="pattern"]:checked')?.value;
  for (const fieldset of form.querySelectorAll("[data-pattern]")) {
    const shown = fieldset.dataset.pattern === chosen;
    fieldset.hidden = !shown;
    // Hidden patterns' fields must not block the browser's own validation.
    for (const input of fieldset.querySelectorAll("input, select, textarea")) {
      input.disabled = !shown;
    }
  }
}

function addRow(formset) {
  const total = formset.querySelector('input[name$="-TOTAL_FORMS"]');
  const template = formset.querySelector("template[data-formset-empty]");
  const index = Number(total.value);
  const html = template.innerHTML.replaceAll("__prefix__", String(index));
  formset.querySelector("[data-formset-rows]").insertAdjacentHTML("beforeend", html);
  total.value = String(index + 1);
}

if (form) {
  for (const radio of form.querySelectorAll('input[name="pattern"]')) {
    radio.addEventListener("change", showChosen);
  }
  for (const button of form.querySelectorAll("[data-formset-add]")) {
    button.addEventListener("click", () => addRow(button.closest("[data-formset]")));
  }
  showChosen();
}
