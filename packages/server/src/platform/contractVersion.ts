/**
 * The contract-version gate (spec: Versioning 2; run-state.md preamble), one middleware on every `…/state/` group:
 * `Svc-Contract-Version` absent → the current major; `1` or `2` → served; anything else → 409
 * `contract_version_unsupported` with `details: { supported: { min, max }, requested }`. The group adds it between
 * authentication and authorization, so it answers before every check but authentication.
 */
import {
  CONTRACT_VERSION_HEADER,
  CONTRACT_VERSIONS,
  ContractVersionGate,
  ContractVersionUnsupported,
  wireError
} from "@cp/domain"
import { Effect, Layer, type Types } from "effect"
import { HttpServerRequest, type HttpServerResponse } from "effect/http"

/** Whether a header value names a served major (absent counts as the current one). */
export const isSupportedContractVersion = (requested: string | undefined): boolean => {
  if (requested === undefined) return true
  if (!/^\s*[0-9]+\s*$/.test(requested)) return false
  const major = Number(requested.trim())
  return major >= CONTRACT_VERSIONS.min && major <= CONTRACT_VERSIONS.max
}

export const ContractVersionGateLive = Layer.succeed(ContractVersionGate)((httpEffect) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (
    request
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, ContractVersionUnsupported | Types.unhandled> => {
    const requested = request.headers[CONTRACT_VERSION_HEADER]
    return isSupportedContractVersion(requested) ? httpEffect : Effect.fail(
      wireError(ContractVersionUnsupported, `Contract version ${requested} is not supported`, {
        supported: { min: CONTRACT_VERSIONS.min, max: CONTRACT_VERSIONS.max },
        requested: requested ?? null
      })
    )
  })
)
