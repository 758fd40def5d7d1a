"""The OpenSearch Serverless collection of the search index (issue "Stage 7 and the read
path"): encryption, network and data access policies, and the deploy-time step that creates
the index and the hybrid search pipeline (a custom resource over the index-setup handler)."""

from __future__ import annotations

import json
import typing
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_opensearchserverless as aoss
from aws_cdk import custom_resources as cr
from constructs import Construct

from infra.config import SearchConfig
from memwrite.adapters.aws.opensearch_index import index_body
from memwrite.ids import content_hash

__all__ = ["INDEX_SETUP_HANDLER", "SearchCollection"]

# Creates the index mapping and the hybrid search pipeline through the OpenSearch adapter; on
# Update re-applies them (idempotent), on Delete leaves the data.
INDEX_SETUP_HANDLER = "functions.index_setup.handler.on_event"


class SearchCollection(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: SearchConfig,
        writers: Sequence[iam.IRole],
        readers: Sequence[iam.IRole],
        admins: Sequence[iam.IRole],
        removal_policy: cdk.RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        name = config.collection_name
        encryption = aoss.CfnSecurityPolicy(
            self,
            "Encryption",
            name=f"{name}-enc",
            type="encryption",
            policy=json.dumps(
                {
                    "Rules": [{"ResourceType": "collection", "Resource": [f"collection/{name}"]}],
                    "AWSOwnedKey": True,
                }
            ),
        )
        network = aoss.CfnSecurityPolicy(
            self,
            "Network",
            name=f"{name}-net",
            type="network",
            # Public endpoint, IAM (SigV4) authentication and the data policy below decide
            # access; a VPC endpoint would put every Lambda in a VPC.
            policy=json.dumps(
                [
                    {
                        "Rules": [
                            {"ResourceType": "collection", "Resource": [f"collection/{name}"]}
                        ],
                        "AllowFromPublic": True,
                    }
                ]
            ),
        )
        self.collection = aoss.CfnCollection(
            self,
            "Collection",
            name=name,
            type="SEARCH",  # BM25 and kNN vectors in one index (hybrid queries)
            standby_replicas="ENABLED" if config.standby_replicas else "DISABLED",
        )
        self.collection.node.add_dependency(encryption, network)
        self.collection.apply_removal_policy(removal_policy)

        def data_rule(roles: Sequence[iam.IRole], permissions: list[str]) -> dict[str, object]:
            return {
                "Rules": [
                    {
                        "ResourceType": "index",
                        "Resource": [f"index/{name}/{config.index_name}"],
                        "Permission": permissions,
                    }
                ],
                "Principal": [role.role_arn for role in roles],
            }

        rules = [
            data_rule(writers, ["aoss:ReadDocument", "aoss:WriteDocument", "aoss:DescribeIndex"]),
            data_rule(readers, ["aoss:ReadDocument", "aoss:DescribeIndex"]),
        ]
        rules.append(
            {
                "Rules": [
                    {
                        "ResourceType": "index",
                        "Resource": [f"index/{name}/{config.index_name}"],
                        "Permission": [
                            "aoss:CreateIndex",
                            "aoss:UpdateIndex",
                            "aoss:DescribeIndex",
                        ],
                    },
                    {
                        "ResourceType": "collection",
                        "Resource": [f"collection/{name}"],
                        "Permission": [
                            "aoss:DescribeCollectionItems",
                            "aoss:UpdateCollectionItems",
                        ],
                    },
                ],
                "Principal": [role.role_arn for role in admins],
            }
        )
        self.data_access = aoss.CfnAccessPolicy(
            self,
            "DataAccess",
            name=f"{name}-data",
            type="data",
            policy=cdk.Stack.of(self).to_json_string([r for r in rules if r["Principal"]]),
        )
        for role in [*writers, *readers, *admins]:
            # The data policy decides per index; IAM must let the role call the collection.
            iam.Policy(
                self,
                f"ApiAccess{cdk.Names.node_unique_id(role.node)[-8:]}",
                statements=[
                    iam.PolicyStatement(
                        actions=["aoss:APIAccessAll"], resources=[self.collection.attr_arn]
                    )
                ],
                roles=[role],
            )
        self.endpoint = self.collection.attr_collection_endpoint

    def add_index_setup(
        self, on_event: lambda_.IFunction, config: SearchConfig, *, search_settings: str
    ) -> None:
        """The deploy-time index and pipeline creation, run once the collection and its data
        access policy exist; again (Update) when a property, the search settings included,
        changes."""
        provider = cr.Provider(self, "IndexSetupProvider", on_event_handler=on_event)
        on_event_id = cdk.Stack.of(self).get_logical_id(
            typing.cast(cdk.CfnElement, on_event.node.default_child)
        )
        for finding, reason in (
            (
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AWSLambdaBasicExecutionRole]",
                "CDK's custom-resource provider framework function; it runs at deploy only.",
            ),
            (
                f"AwsSolutions-IAM5[Resource::<{on_event_id}.Arn>:*]",
                "The provider framework invokes the index-setup function (its versions too).",
            ),
            ("AwsSolutions-L1", "The provider framework's runtime is chosen by CDK."),
        ):
            cdk.Validations.of(provider).acknowledge(cdk.Acknowledgment(id=finding, reason=reason))
        resource = cdk.CustomResource(
            self,
            "IndexSetup",
            service_token=provider.service_token,
            properties={
                "endpoint": self.endpoint,
                "index": config.index_name,
                "search_settings": search_settings,
                # The index's fields: one added changes this, so the deploy runs Update and
                # `ensure_index` adds it to the existing index (its mapping is strict).
                "mapping": content_hash(json.dumps(index_body(1)["mappings"], sort_keys=True)),
            },
        )
        resource.node.add_dependency(self.collection, self.data_access)
