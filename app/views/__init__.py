"""Views: the view service."""
