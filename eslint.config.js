// Lint rules on top of dprint's formatting: typescript-eslint's recommended set, no `any`, and the line width.
import js from "@eslint/js"
import tseslint from "typescript-eslint"

export default tseslint.config(
  { ignores: ["**/node_modules/**", "**/.data/**", "**/.tsbuild/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-namespace": "off",
      "max-len": ["error", { code: 120, ignoreUrls: true }],
      "no-constant-condition": ["error", { checkLoops: false }],
      // Effect.fn generators that only return are the idiom for memory layers; Layer<..., {}> is Effect's own type.
      "require-yield": "off",
      "@typescript-eslint/no-empty-object-type": "off"
    }
  }
)
