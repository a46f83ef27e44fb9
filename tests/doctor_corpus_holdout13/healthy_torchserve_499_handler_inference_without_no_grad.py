# Source: https://github.com/pytorch/serve/issues/499
#   code: ts/torch_handler/base_handler.py (BaseHandler.preprocess, inference, postprocess,
#   handle) and ts/torch_handler/image_classifier.py (ImageClassifier.postprocess with
#   map_class_to_label) as they were before https://github.com/pytorch/serve/pull/501 added
#   torch.no_grad() to inference
# Adapted: the frontend, worker and model archive are replaced by a loop that calls
#   handler.handle on 400 requests of one 3x64x64 image each (random bytes decoded to a
#   tensor instead of PIL); resnet-18 replaced by a small conv net with 10 classes and an
#   index_to_name mapping built in the script; context reduced to what initialize reads.
import torch
import torch.nn as nn
import torch.nn.functional as F


def map_class_to_label(probs, mapping=None, lbl_classes=None):
    if mapping is not None:
        lbl_classes = [[mapping[str(c)] for c in row] for row in lbl_classes]
    return [dict(zip(*pair)) for pair in zip(lbl_classes, probs)]


class BaseHandler:
    def __init__(self):
        self.model = None
        self.mapping = None
        self.device = None
        self.initialized = False
        self.context = None

    def initialize(self, context):
        self.device = torch.device("cpu")
        self.model = context["model"]
        self.model.to(self.device)
        self.model.eval()
        self.mapping = context["index_to_name"]
        self.initialized = True

    def preprocess(self, data):
        return torch.as_tensor(data, device=self.device)

    def inference(self, data, *args, **kwargs):
        marshalled_data = data.to(self.device)
        results = self.model(marshalled_data, *args, **kwargs)
        return results

    def postprocess(self, data):
        return data.tolist()

    def handle(self, data, context):
        self.context = context
        data_preprocess = self.preprocess(data)
        output = self.inference(data_preprocess)
        output = self.postprocess(output)
        return output


class ImageClassifier(BaseHandler):
    topk = 5

    def preprocess(self, data):
        images = []
        for row in data:
            image = row.get("data") or row.get("body")
            image = torch.frombuffer(bytearray(image), dtype=torch.uint8).float().view(3, 64, 64) / 255.0
            images.append((image - 0.45) / 0.225)
        return torch.stack(images).to(self.device)

    def postprocess(self, data):
        ps = F.softmax(data, dim=1)
        probs, classes = torch.topk(ps, self.topk, dim=1)
        probs = probs.tolist()
        classes = classes.tolist()
        return map_class_to_label(probs, self.mapping, classes)


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, stride=2, padding=1),
                      nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
handler = ImageClassifier()
context = {"model": model, "index_to_name": {str(i): f"class_{i}" for i in range(10)}}
handler.initialize(context)
responses = 0
for request_id in range(400):
    request = [{"body": torch.randint(0, 256, (3 * 64 * 64,), dtype=torch.uint8).numpy().tobytes()}]
    response = handler.handle(request, context)
    responses += len(response)
print("responses", responses, response[0])
