"""CSRF protection of the console's forms.

A form's token is an HMAC of a fixed label keyed by the session cookie's value (the token
Growler issued, which no other site can read: the cookie is HttpOnly): it needs no storage, is
the same in every worker, and changes with every sign-in. Without a session (GROWLER_AUTH=none,
or the sign-in form) the key is a random double-submit cookie. Every POST to the console is
checked before its view runs; a missing or wrong token is a 400 that changes nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from flask import Blueprint, Response, abort, g, request

from app.edge.auth.console import CSRF_COOKIE, CSRF_FIELD, PREFIX, SESSION_COOKIE, SIGN_IN

CSRF_COOKIE_AGE_S = 3600


def _key() -> str | None:
    return request.cookies.get(SESSION_COOKIE) or request.cookies.get(CSRF_COOKIE) or g.get("new_csrf_key")


def token() -> str:
    """The token this page's forms carry (a fresh double-submit cookie is set when there is no key)."""
    if request.path == SIGN_IN:  # the sign-in form's token is the cookie itself (double submit)
        raw = request.cookies.get(CSRF_COOKIE) or g.get("new_csrf_key")
        if raw is None:
            raw = g.new_csrf_key = secrets.token_urlsafe(24)
        return raw
    key = _key()
    if key is None:
        key = g.new_csrf_key = secrets.token_urlsafe(24)
    return hmac.new(key.encode(), b"growler-console-csrf", hashlib.sha256).hexdigest()


def install(blueprint: Blueprint) -> None:
    @blueprint.before_request
    def check() -> None:
        if request.method in ("GET", "HEAD"):
            return
        key = _key()
        sent = request.form.get(CSRF_FIELD, "")
        if key is None or not sent or not hmac.compare_digest(sent, token()):
            abort(400, description="The form expired or did not come from this console: reload the page and retry.")

    @blueprint.after_request
    def set_cookie(response: Response) -> Response:
        new = g.get("new_csrf_key")
        if new is not None:
            response.set_cookie(
                CSRF_COOKIE,
                new,
                max_age=CSRF_COOKIE_AGE_S,
                path=PREFIX,
                httponly=True,
                samesite="Lax",
                secure=request.headers.get("X-Forwarded-Proto", request.scheme).split(",")[0].strip() == "https",
            )
        response.headers.setdefault("Cache-Control", "no-store")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        response.headers.setdefault(
            "Content-Security-Policy",
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
            "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
        )
        return response
