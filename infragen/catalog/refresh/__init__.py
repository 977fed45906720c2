"""Scripts that (re)write the catalog data files for review: from the reference CSVs or the cloud APIs.

Never imported by the runtime; cloud SDKs (boto3, alibabacloud_ecs20140526) are imported inside functions only.
"""
