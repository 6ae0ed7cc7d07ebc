"""Every SQS action of leasehold serve through Debian's boto3, whose
botocore (before 1.31.81) speaks the query protocol. It exits non-zero,
naming the step, at the first answer that is not SQS's.

The environment names the server (LEASEHOLD_URL) and the credentials
(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY).
"""

import hashlib
import os
import sys

import boto3
from botocore.exceptions import ClientError

sqs = boto3.client("sqs", endpoint_url=os.environ["LEASEHOLD_URL"], region_name="us-east-1")
if sqs.meta.service_model.protocol != "query":
    sys.exit("this botocore speaks %s, not the query protocol" % sqs.meta.service_model.protocol)


def check(what, ok, got):
    if not ok:
        sys.exit("%s: %r" % (what, got))


def code(call, **kwargs):
    try:
        call(**kwargs)
    except ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    return None, 200


url = sqs.create_queue(QueueName="boto3", Attributes={"VisibilityTimeout": "40"}, tags={"team": "a"})["QueueUrl"]
check("get_queue_url", sqs.get_queue_url(QueueName="boto3")["QueueUrl"] == url, url)
check("list_queues", url in sqs.list_queues(QueueNamePrefix="bo").get("QueueUrls", []), url)
check("get_queue_url of a missing queue", code(sqs.get_queue_url, QueueName="missing") == ("AWS.SimpleQueueService.NonExistentQueue", 400), None)
sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "0", "MaximumMessageSize": "4096"})
check("set_queue_attributes with a bad name", code(sqs.set_queue_attributes, QueueUrl=url, Attributes={"Bogus": "1"})[0] == "InvalidAttributeName", None)
attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
check("get_queue_attributes", attrs["VisibilityTimeout"] == "40" and attrs["MaximumMessageSize"] == "4096", attrs)
sqs.tag_queue(QueueUrl=url, Tags={"env": "test", "x": "y"})
sqs.untag_queue(QueueUrl=url, TagKeys=["x"])
tags = sqs.list_queue_tags(QueueUrl=url)["Tags"]
check("list_queue_tags", tags == {"team": "a", "env": "test"}, tags)

body = "one <&> \r\n \u20ac \U0001F600"
sent = sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes={
    "colour": {"DataType": "String", "StringValue": "red"},
    "n": {"DataType": "Number", "StringValue": "-1.5e3"},
    "raw": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xff"},
})
check("send_message's MD5", sent["MD5OfMessageBody"] == hashlib.md5(body.encode()).hexdigest(), sent)
batch = sqs.send_message_batch(QueueUrl=url, Entries=[
    {"Id": "a", "MessageBody": "two"}, {"Id": "b", "MessageBody": "three"},
    {"Id": "c", "MessageBody": "late", "DelaySeconds": 901}])
check("send_message_batch", [e["Id"] for e in batch["Successful"]] == ["a", "b"] and
      [(e["Id"], e["SenderFault"], e["Code"]) for e in batch["Failed"]] == [("c", True, "InvalidParameterValue")], batch)
check("send_message_batch of eleven", code(sqs.send_message_batch, QueueUrl=url,
      Entries=[{"Id": str(i), "MessageBody": "x"} for i in range(11)])[0] == "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", None)

got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"])["Messages"]
check("receive_message", sorted(m["Body"] for m in got) == sorted([body, "two", "three"]), got)
first = [m for m in got if m["Body"] == body][0]
check("message attributes", first["MessageAttributes"]["raw"]["BinaryValue"] == b"\x00\x01\xff" and
      first["MessageAttributes"]["n"] == {"DataType": "Number", "StringValue": "-1.5e3"} and
      first["Attributes"]["ApproximateReceiveCount"] == "1" and first["MD5OfBody"] == hashlib.md5(body.encode()).hexdigest(), first)
handles = [m["ReceiptHandle"] for m in got]
sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handles[0], VisibilityTimeout=60)
changed = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
    {"Id": "a", "ReceiptHandle": handles[1], "VisibilityTimeout": 60},
    {"Id": "b", "ReceiptHandle": "forged", "VisibilityTimeout": 60}])
check("change_message_visibility_batch", [e["Id"] for e in changed["Successful"]] == ["a"] and
      [e["Code"] for e in changed["Failed"]] == ["ReceiptHandleIsInvalid"], changed)
sqs.delete_message(QueueUrl=url, ReceiptHandle=handles[0])
check("delete_message of a forged handle", code(sqs.delete_message, QueueUrl=url, ReceiptHandle="forged")[0] == "ReceiptHandleIsInvalid", None)
deleted = sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": "x", "ReceiptHandle": handles[1]}, {"Id": "y", "ReceiptHandle": handles[2]}])
check("delete_message_batch", sorted(e["Id"] for e in deleted["Successful"]) == ["x", "y"] and not deleted.get("Failed"), deleted)
sqs.send_message(QueueUrl=url, MessageBody="to purge")
sqs.purge_queue(QueueUrl=url)
attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
check("the queue after purge_queue", attrs == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}, attrs)
sqs.delete_queue(QueueUrl=url)
check("the queue after delete_queue", code(sqs.get_queue_url, QueueName="boto3")[0] == "AWS.SimpleQueueService.NonExistentQueue", None)
print("ok")
