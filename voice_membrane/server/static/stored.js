// localStorage and sessionStorage, where a privacy setting may refuse them:
// then nothing is remembered, and nothing fails.

export const stored = {
  get: (store, key) => {
    try {
      return store.getItem(key);
    } catch {
      return null; // storage refused (a privacy setting): nothing remembered
    }
  },
  set: (store, key, value) => {
    try {
      if (value === null) store.removeItem(key);
      else store.setItem(key, value);
    } catch {}
  },
};
