-- Why the delivery process disabled an endpoint (WebhookEndpointSet.disabled_reason): no delivery to it
-- succeeded for the retry window. Empty: it is not disabled.
ALTER TABLE webhook_endpoints ADD COLUMN disabled_reason text NOT NULL DEFAULT '';
