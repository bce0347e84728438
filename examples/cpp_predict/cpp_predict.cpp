// Using clcnn from C++: RAII wrappers over the C handles, inference on a batch, and the
// predicted classes. Weights come from a checkpoint when one is given.
#include <clcnn.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {
struct Deleter {
    void operator()(clcnn_devices *d) const {
        clcnn_devices_free(d);
    }
    void operator()(clcnn_context *c) const {
        clcnn_context_free(c);
    }
    void operator()(clcnn_model *m) const {
        clcnn_model_free(m);
    }
};
template <class T>
using handle = std::unique_ptr<T, Deleter>;

void check(clcnn_status st, const char *what, const char *msg) {
    if (st != CLCNN_SUCCESS)
        throw std::runtime_error(std::string(what) + ": " + clcnn_status_str(st) + ": " + msg);
}
} // namespace

int main(int argc, char **argv) {
    try {
        clcnn_devices *d = nullptr;
        clcnn_status st = clcnn_devices_create(&d, nullptr);
        handle<clcnn_devices> devs(d);
        check(st, "devices", clcnn_devices_errmsg(d));
        int idx = -1;
        check(clcnn_devices_select(d, -1, -1, &idx), "select", clcnn_devices_errmsg(d));
        clcnn_context *c = nullptr;
        st = clcnn_context_create(&c, d, idx, nullptr);
        handle<clcnn_context> ctx(c);
        check(st, "context", clcnn_context_errmsg(c));
        clcnn_model *m = nullptr;
        st = clcnn_model_create(&m, c, "seed", 1, 28, 28, 1);
        handle<clcnn_model> model(m);
        check(st, "model", clcnn_model_errmsg(m));
        if (argc > 1) check(clcnn_model_load_weights(m, argv[1]), "weights", clcnn_model_errmsg(m));
        const int n = 4, k = clcnn_model_output_size(m);
        std::vector<float> x(n * 28 * 28), logits(n * k);
        for (size_t i = 0; i < x.size(); i++)
            x[i] = float(i % 255) / 255.0f;
        check(clcnn_model_predict(m, x.data(), n, logits.data()), "predict", clcnn_model_errmsg(m));
        for (int i = 0; i < n; i++) {
            int best = 0;
            for (int j = 1; j < k; j++)
                if (logits[i * k + j] > logits[i * k + best]) best = j;
            std::printf("sample %d: class %d (logit %.4f)\n", i, best, logits[i * k + best]);
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "cpp_predict: %s\n", e.what());
        return 1;
    }
    return 0;
}
