// ESLint for the web page's script: a plain browser script (no modules, no build step), checked with
// ESLint's recommended rules and a few that catch what a browser would not complain about.
import js from "@eslint/js";
import globals from "globals";

export default [
  {
    files: ["**/*.js"],
    ...js.configs.recommended,
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "script",
      globals: { ...globals.browser },
    },
    linterOptions: {
      reportUnusedDisableDirectives: "error",
    },
    rules: {
      ...js.configs.recommended.rules,
      eqeqeq: ["error", "smart"],
      "no-implicit-globals": "error",
      "no-var": "error",
      "prefer-const": "error",
      strict: ["error", "global"],
      // The page gives variables a first value even when every path assigns one before use.
      "no-useless-assignment": "off",
    },
  },
];
