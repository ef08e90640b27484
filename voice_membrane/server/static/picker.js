// The pipeline picker: labelled, shown when the server allows more than one
// pipeline, each with its description and whether it listens (has [stt]); the
// choice lives in the address (?pipeline=NAME).

export function showPipelines(select, field, started) {
  const names = started.pipelines || [];
  const descriptions = started.descriptions || {};
  const listening = started.listening || {};
  const current = started.pipeline;
  field.hidden = names.length < 2;
  select.replaceChildren(
    ...names.map((name) => {
      const option = document.createElement("option");
      option.value = name;
      const description = descriptions[name];
      const listens = listening[name] ? " (listens)" : "";
      option.textContent = description ? `${name} — ${description}${listens}` : `${name}${listens}`;
      option.selected = name === current;
      return option;
    }),
  );
  const chosen = descriptions[current];
  select.title = chosen ? `${current}: ${chosen}` : current;
}
