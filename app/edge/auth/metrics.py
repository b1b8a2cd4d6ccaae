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
