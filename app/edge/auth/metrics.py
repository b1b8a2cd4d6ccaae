"""Authentication's metrics: labels are reasons and outcomes, never a principal, token or secret."""

from prometheus_client import Counter

AUTH_FAILURES = Counter(
    "growler_auth_failures",
    "Requests refused with 401, by reason: missing, malformed, expired, not_yet_valid, signature, "
    "unknown_key, issuer, audience, revoked, no_principal",
    ["reason"],
)
TOKEN_REQUESTS = Counter(
    "growler_token_requests",
    "Requests to POST /v1/oauth/tokens by grant (client_credentials, token_exchange, missing, other) and "
    "outcome (issued, or the OAuth2 error)",
    ["grant", "outcome"],
)
JWKS_FETCHES = Counter(
    "growler_oidc_jwks_fetches",
    "Fetches of the identity provider's keys (JWKS), by outcome (ok, error); an unknown kid triggers one at "
    "most once per GROWLER_OIDC_JWKS_MIN_REFRESH_S",
    ["outcome"],
)
