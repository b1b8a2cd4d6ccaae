"""Keyset pagination, shared by every listing: the window a request asks for (its sealed page
token opened, app/ground/page_tokens.py), the page filled with items the caller may see, and the
list answers the handlers and the event loop render alike.

Its own module because namespaces, tables, views, functions and the management API all page the
same way; none of it reads storage (the services pass their fetches in).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.ground.errors import BadRequest
from app.ground.page_tokens import PageTokens, scope
from app.rules.identifiers import page_window

MAX_BATCH = 1000  # rows a listing fetches at most at once while it fills a page (fill_page)


@dataclass(frozen=True)
class Page:
    items: list[Any]
    next_page_token: str | None


@dataclass(frozen=True)
class PageWindow:
    """Which items a list request asks for: after which key, how many, and whether the answer
    carries a next-page token (``page_window``). Tokens are sealed for one ``listing``
    (app/ground/page_tokens.py): namespaces are keyed by their path (a list), tables, views and
    functions by their name (a string); a token of another listing, or not ours, is a 400."""

    paginate: bool
    limit: int | None
    after: list[str] | str | None
    tokens: PageTokens
    listing: bytes

    @classmethod
    def of(
        cls,
        page_token: str | None,
        page_size: int | None,
        max_page_size: int,
        keyed_by: type,
        tokens: PageTokens,
        listing: bytes,
    ) -> PageWindow:
        paginate, limit = page_window(page_token, page_size, max_page_size)
        after = tokens.open(listing, page_token) if page_token else None
        if after is not None and not isinstance(after, keyed_by):  # sealed for this listing: never
            raise BadRequest("Invalid pageToken")
        return cls(paginate, limit, after, tokens, listing)

    @property
    def fetch(self) -> int | None:
        """Rows to fetch: one more than the page, to learn whether another page exists."""
        return None if self.limit is None else self.limit + 1

    def page(self, rows: list[Any], key_of: Callable[[Any], list[str] | str] | None = None) -> Page:
        """The page of ``rows`` fetched for this window, with the next page's (sealed) token:
        of the last row's key (``key_of``; by default a name, or a namespace's path)."""
        key = key_of or _key
        seal = self.tokens.seal
        return page_of(rows, self.limit, (lambda last: seal(self.listing, key(last))) if self.paginate else None)


def fill_page(
    window: PageWindow,
    fetch: Callable[[Any, int | None], list[Any]],
    visible: Callable[[list[Any]], list[Any]],
) -> Page:
    """A page of up to ``window.limit`` items the caller may see, fetched in batches.

    A page filtered after one fetch could come out short or empty with a token that still led
    on: a caller paging one item at a time counted the hidden items between the ones it sees,
    and each token stood on a hidden name. Here rows are fetched on (the first batch is the
    window's one-more-than-a-page, so a caller who sees everything costs one query as before;
    later batches double, up to ``MAX_BATCH``) until one visible item more than the page is
    found or the listing ends; the token stands on the page's last visible item. So the pages
    are exactly the visible items, and a token is handed out only when another visible item follows.
    """
    batch = window.fetch
    rows = fetch(window.after, batch)
    found = visible(rows)
    while batch is not None and window.limit is not None and len(found) <= window.limit and len(rows) == batch:
        after = _key(rows[-1])
        batch = min(batch * 2, MAX_BATCH)
        rows = fetch(after, batch)
        found += visible(rows)
    return window.page(found)


def first_batch_page(window: PageWindow, rows: list[Any], visible: Callable[[list[Any]], list[Any]]) -> Page | None:
    """``fill_page``'s answer when its first batch (``rows``) decides it, else None (the event
    loop then leaves the request to the handler, which fetches on in a thread)."""
    found = visible(rows)
    if window.fetch is None or window.limit is None or len(found) > window.limit or len(rows) < window.fetch:
        return window.page(found)
    return None


def _key(item: Any) -> list[str] | str:
    return item if isinstance(item, str) else list(item)


def namespaces_answer(page: Page) -> dict[str, Any]:
    """listNamespaces' body, the same from the handler and from the event loop."""
    return _with_token({"namespaces": [list(path) for path in page.items]}, page)


def identifiers_answer(namespace: tuple[str, ...], page: Page) -> dict[str, Any]:
    """listTables' and listViews' body, the same from the handlers and from the event loop."""
    return _with_token({"identifiers": [{"namespace": list(namespace), "name": name} for name in page.items]}, page)


def _with_token(body: dict[str, Any], page: Page) -> dict[str, Any]:
    if page.next_page_token:
        body["next-page-token"] = page.next_page_token
    return body


def names_window(
    operation: str,
    warehouse: str,
    namespace: tuple[str, ...],
    page_token: str | None,
    page_size: int | None,
    max_page_size: int,
    tokens: PageTokens,
) -> PageWindow:
    """The window of a listing of names in one namespace (tables, views, functions): its
    tokens lead on in this listing of this namespace only."""
    listing = scope(operation, warehouse, list(namespace))
    return PageWindow.of(page_token, page_size, max_page_size, str, tokens, listing)


def page_of_names(window: PageWindow, fetch: Callable[[str | None, int | None], list[str]]) -> Page:
    """A page of names keyset-paginated by name: ``fetch(after, limit)`` returns up to ``limit``
    names after ``after`` in byte order."""
    return window.page(fetch(window.after, window.fetch))  # type: ignore[arg-type]


def page_of(rows: list[Any], limit: int | None, token_for: Callable[[Any], str] | None) -> Page:
    """Trim the one extra row fetched to learn whether another page exists.

    ``token_for`` makes the next page's token from the last item; None when not paginating.
    """
    if limit is not None and len(rows) > limit:
        rows = rows[:limit]
        return Page(rows, token_for(rows[-1]) if token_for else None)
    return Page(rows, None)
