// Formatting (dprint through @effect/eslint-plugin, Effect's own style at width 120) and lint (typescript-eslint's
// recommended set, no `any`) in one pass: `npm run lint` checks, `npm run format` fixes what can be fixed.
import * as effectEslint from "@effect/eslint-plugin"
import js from "@eslint/js"
import tseslint from "typescript-eslint"

export default tseslint.config(
  { ignores: ["**/node_modules/**", "**/.data/**", "**/.tsbuild/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  ...effectEslint.configs.dprint,
  {
    rules: {
      "@effect/dprint": ["error", {
        config: {
          indentWidth: 2,
          lineWidth: 120,
          semiColons: "asi",
          quoteStyle: "alwaysDouble",
          trailingCommas: "never",
          operatorPosition: "maintain",
          "arrowFunction.useParentheses": "force"
        }
      }],
      "max-len": ["error", { code: 120, ignoreUrls: true }],
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-constant-condition": ["error", { checkLoops: false }],
      // Effect.fn generators that only return are the memory layers' idiom; Layer<…, {}> is Effect's own type.
      "require-yield": "off",
      "@typescript-eslint/no-empty-object-type": "off"
    }
  }
)
