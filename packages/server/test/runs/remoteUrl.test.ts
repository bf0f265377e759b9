/** Remote URL canonicalisation (run-state.md §1) as a plain function: every accepted form, and every refusal. */
import { assert, describe, it } from "@effect/vitest"
import { canonicalRemote } from "../../src/runs/remoteUrl.ts"

describe("canonicalRemote", () => {
  it("https, ssh and scp-like forms become https://host/owner/repo with a lower-case host and no .git", () => {
    for (
      const input of [
        "https://GitHub.com/Acme/Widget",
        "https://github.com/Acme/Widget.git",
        "https://github.com/Acme/Widget/",
        "https://token@github.com/Acme/Widget.git",
        "ssh://git@GITHUB.com/Acme/Widget.git",
        "ssh://git@github.com:22/Acme/Widget.git",
        "git@github.com:Acme/Widget.git",
        "git@github.com:Acme/Widget",
        "  git@github.com:/Acme/Widget.git  "
      ]
    ) {
      const canonical = canonicalRemote(input)
      assert.deepStrictEqual(canonical, {
        url: "https://github.com/Acme/Widget",
        host: "github.com",
        path: "Acme/Widget",
        name: "Widget"
      }, input)
    }
    const nested = canonicalRemote("https://git.example:8443/group/sub/repo.git")
    assert.deepStrictEqual(nested, {
      url: "https://git.example:8443/group/sub/repo",
      host: "git.example:8443",
      path: "group/sub/repo",
      name: "repo"
    })
  })

  it("a password is refused as such; anything else that is not a remote is refused as a form", () => {
    assert.strictEqual(canonicalRemote("https://user:hunter2@github.com/a/b.git"), "password")
    for (
      const input of [
        "github.com/a/b",
        "https://github.com/onlyowner",
        "https://github.com/a/b?x=1",
        "ftp://github.com/a/b",
        "git@github.com:a",
        "https://github.com/a/../b",
        "https:///a/b",
        ""
      ]
    ) assert.strictEqual(canonicalRemote(input), "form", input)
  })
})
