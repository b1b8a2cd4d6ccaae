"""The change feed (its endpoint), its sinks (management) and the publisher (push delivery:
every worker runs one; the lease holder delivers)."""

from __future__ import annotations

from dataclasses import dataclass

from app.composition.storage import Foundation
from app.event_sinks.service import EventSinks
from app.events.feed import EventFeed
from app.ground.secrets import SecretBox
from app.publisher.service import Publisher
from app.publisher.webhooks import WebhookGuard
from storage.deliveries import DeliveryRows
from storage.events import EventRows


@dataclass(frozen=True)
class Events:
    feed: EventFeed
    sinks: EventSinks
    publisher: Publisher


def build_events(base: Foundation) -> Events:
    settings = base.settings
    deliveries = DeliveryRows(base.database)
    box = SecretBox(settings.secrets_key) if settings.secrets_key else None
    # Where webhooks may go (app/publisher/webhooks.py): checked when a sink is made and at every delivery.
    webhook_guard = WebhookGuard(settings.webhook_allowed_networks, settings.database_url)
    return Events(
        feed=EventFeed(
            settings,
            EventRows(base.database),
            base.warehouses,
            authorizer=base.authorizer,
            page_tokens=base.page_tokens,
        ),
        sinks=EventSinks(settings, deliveries, rights=base.rights, webhook_guard=webhook_guard),
        publisher=Publisher(
            deliveries,
            lambda: box,
            webhook_guard=webhook_guard,
            nats_url=settings.events_nats_url,
            backoff_s=settings.events_retry_base_s,
        ),
    )
