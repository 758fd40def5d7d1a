"""Tenants' own settings: stored through the API (`GET|PUT /v1/settings`), validated by the
config file's models (`memwrite.config.tenant_overrides.TenantOverrides`), laid over the
deployment's file and cached briefly in each function (`TenantConfigs`)."""

from memwrite.tenants.configs import SETTINGS_CACHE_SECS, TenantConfigs

__all__ = ["SETTINGS_CACHE_SECS", "TenantConfigs"]
