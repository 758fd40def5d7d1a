"""The configuration reference page is generated from the config models: it must match them."""

from memwrite_local import config_docs


def test_the_committed_configuration_page_matches_the_models() -> None:
    # Given the page committed under docs/ and the page the models generate now
    committed = config_docs.PAGE.read_text(encoding="utf-8")
    # When they are compared
    generated = config_docs.render()
    # Then they are the same: a changed knob, default, bound or comment needs the page too
    assert committed == generated, "docs/reference/configuration.md is stale: make config-docs"


def test_every_pipeline_section_is_on_the_page() -> None:
    # Given the pipeline config's sections
    from memwrite.config.settings import PipelineConfig

    # When the page is generated
    page = config_docs.render()
    # Then each section has its own heading (a new section cannot be left out silently)
    for name in PipelineConfig.model_fields:
        assert f"### `pipeline.{name}`" in page
