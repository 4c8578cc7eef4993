// Uploads a constellation archive with a progress bar, then opens the
// imported constellation (or shows why the site refused the archive).
// XMLHttpRequest, not fetch: only it reports upload progress.
import { csrfToken } from "./lib/request.js";

const form = document.querySelector("[data-backup-upload]");
const progress = form.querySelector("[data-upload-progress]");
const bar = progress.querySelector("progress");
const label = form.querySelector("[data-upload-label]");
const error = form.querySelector("[data-upload-error]");
const button = form.querySelector("button[type=submit]");

function fail(message) {
  error.textContent = message;
  error.hidden = false;
  progress.hidden = true;
  button.disabled = false;
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const xhr = new XMLHttpRequest();
  xhr.open("POST", form.action || location.href);
  xhr.setRequestHeader("X-CSRFToken", csrfToken());
  xhr.responseType = "json";
  xhr.upload.addEventListener("progress", (e) => {
    if (!e.lengthComputable) return;
    bar.value = Math.round((e.loaded / e.total) * 100);
    label.textContent = `${bar.value}% uploaded`;
  });
  // Once every byte is sent the server checks and imports the archive.
  xhr.upload.addEventListener("load", () => {
    bar.value = 100;
    label.textContent = "Uploaded; importing…";
  });
  xhr.addEventListener("load", () => {
    const body = xhr.response || {};
    if (xhr.status !== 200) {
      fail(body.error || `The import failed (HTTP ${xhr.status}).`);
      return;
    }
    label.textContent = `Imported ${body.constellation}: ${body.rows} rows.`;
    location.assign(body.url);
  });
  xhr.addEventListener("error", () => fail("The upload was interrupted."));
  error.hidden = true;
  progress.hidden = false;
  button.disabled = true;
  xhr.send(new FormData(form));
});
