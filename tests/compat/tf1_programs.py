"""TF1 input programs written for these tests in the style of TF1-era code (CIFAR-10's
binary reader with queue runners, MNIST idx files, ImageNet TFRecords with ResNet- and
Inception-style preprocessing, a census CSV, a TFRecordWriter conversion, a PTB-style
batcher, a folder of JPEG files, a feedable train/eval switch). Each makes its own data
in ``workdir`` and is run twice by tests/compat/test_seed_programs.py: with
``tf = tensorflow.compat.v1`` (graph mode, as TF1) and with ``tf = nbdata.compat.v1``
with nothing else changed: no graph block around it, nbdata's namespace starting in
graph mode by itself.

Programs print values where TF fixes them (the md5 of a batch's bytes, exact), and only
shapes, dtypes and ranges of random ones. ``expect_fused(dataset)`` is a no-op under
TensorFlow; under nbdata it asserts that every ``map`` of the dataset fuses.
"""

INPUT_PROGRAMS = {}


def input_program(name):
    def register(src):
        INPUT_PROGRAMS[name] = src
        return src
    return register


HELPERS = """
import hashlib
def make_jpeg(pixels, quality):
    # Test data: one encoder for both runs (TF's and nbdata's encoders differ in bytes;
    # their decoders agree), so the decoded values can be compared exactly.
    import nbdata
    return nbdata.image.encode_jpeg(pixels, quality=quality)
def digest(a):
    a = np.ascontiguousarray(a)
    return "%s %s %s" % (a.dtype, list(a.shape), hashlib.md5(a.tobytes()).hexdigest()[:16])
"""

input_program("cifar10_binary_queue")("""
# --- data: CIFAR-10's binary layout, a label byte then 3072 bytes (R, G, B planes)
rs = np.random.RandomState(10)
data_dir = workdir + "/cifar-10-batches-bin"
if not tf.gfile.Exists(data_dir):
    tf.gfile.MakeDirs(data_dir)
for k in range(1, 3):
    with tf.gfile.GFile(data_dir + "/data_batch_%d.bin" % k, "wb") as f:
        f.write(rs.randint(0, 256, size=(40, 3073)).astype(np.uint8).tobytes())
filenames = [data_dir + "/data_batch_%d.bin" % i for i in range(1, 3)]
for f in filenames:
    if not tf.gfile.Exists(f):
        raise ValueError("Failed to find file: " + f)

IMAGE_SIZE = 24

def read_cifar10(filename_queue):
    label_bytes, height, width, depth = 1, 32, 32, 3
    image_bytes = height * width * depth
    reader = tf.FixedLengthRecordReader(record_bytes=label_bytes + image_bytes)
    key, value = reader.read(filename_queue)
    record_bytes = tf.decode_raw(value, tf.uint8)
    label = tf.cast(tf.strided_slice(record_bytes, [0], [label_bytes]), tf.int32)
    depth_major = tf.reshape(tf.slice(record_bytes, [label_bytes], [image_bytes]),
                             [depth, height, width])
    uint8image = tf.transpose(depth_major, [1, 2, 0])
    label.set_shape([1])
    return uint8image, label

def inputs(eval_data, batch_size):
    with tf.name_scope("input"):
        filename_queue = tf.train.string_input_producer(filenames, shuffle=False)
        uint8image, label = read_cifar10(filename_queue)
        reshaped_image = tf.cast(uint8image, tf.float32)
        if eval_data:   # a central crop, standardized, in file order
            resized_image = tf.image.resize_image_with_crop_or_pad(reshaped_image, IMAGE_SIZE,
                                                                   IMAGE_SIZE)
            float_image = tf.image.per_image_standardization(resized_image)
            float_image.set_shape([IMAGE_SIZE, IMAGE_SIZE, 3])
            return tf.train.batch([resized_image, float_image, label], batch_size=batch_size,
                                  num_threads=1, capacity=64)
        # training: random crops and distortions, shuffled
        distorted = tf.random_crop(reshaped_image, [IMAGE_SIZE, IMAGE_SIZE, 3])
        distorted = tf.image.random_flip_left_right(distorted)
        distorted = tf.image.random_brightness(distorted, max_delta=63)
        distorted = tf.image.random_contrast(distorted, lower=0.2, upper=1.8)
        distorted = tf.image.per_image_standardization(distorted)
        return tf.train.shuffle_batch([distorted, label], batch_size=batch_size, num_threads=2,
                                      capacity=60, min_after_dequeue=20)

crops, images, labels = inputs(True, 16)
train_images, train_labels = inputs(False, 8)
tf.summary.image("images", images)
summary_op = tf.summary.merge_all()

with tf.Session() as sess:
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(sess=sess, coord=coord)
    for step in range(3):
        cr, im, lb = sess.run([crops, images, labels])
        # the standardized values to float32 reduction order: their mean magnitude
        print(step, digest(cr), "%.4f" % np.abs(im).mean(), lb.reshape(-1).tolist())
    ti, tl = sess.run([train_images, train_labels])
    print(ti.shape, ti.dtype, tl.shape, bool(np.isfinite(ti).all()))
    coord.request_stop()
    coord.join(threads)
""")

input_program("mnist_idx_fixed_length")("""
import gzip, struct
rs = np.random.RandomState(7)
images = rs.randint(0, 256, size=(50, 28, 28)).astype(np.uint8)
labels = rs.randint(0, 10, size=50).astype(np.uint8)
tf.gfile.MakeDirs(workdir + "/mnist")
with tf.gfile.Open(workdir + "/mnist/train-images-idx3-ubyte", "wb") as f:
    f.write(struct.pack(">iiii", 2051, 50, 28, 28) + images.tobytes())
with tf.gfile.Open(workdir + "/mnist/train-labels-idx1-ubyte", "wb") as f:
    f.write(struct.pack(">ii", 2049, 50) + labels.tobytes())

def check_image_file_header(filename):
    with tf.gfile.Open(filename, "rb") as f:
        magic, num_images, rows, cols = struct.unpack(">iiii", f.read(16))
        if magic != 2051 or rows != 28 or cols != 28:
            raise ValueError("Invalid magic number / size in MNIST file %s" % filename)

def dataset(directory, images_file, labels_file):
    images_file = directory + "/" + images_file
    labels_file = directory + "/" + labels_file
    check_image_file_header(images_file)

    def decode_image(image):
        image = tf.decode_raw(image, tf.uint8)
        image = tf.cast(image, tf.float32)
        image = tf.reshape(image, [784])
        return image / 255.0

    def decode_label(label):
        label = tf.decode_raw(label, tf.uint8)
        label = tf.reshape(label, [])
        return tf.to_int32(label)

    images = tf.data.FixedLengthRecordDataset(images_file, 28 * 28, header_bytes=16).map(decode_image)
    labels = tf.data.FixedLengthRecordDataset(labels_file, 1, header_bytes=8).map(decode_label)
    return tf.data.Dataset.zip((images, labels))

ds = dataset(workdir + "/mnist", "train-images-idx3-ubyte", "train-labels-idx1-ubyte")
ds = ds.batch(20)
expect_fused(ds)
features, label = ds.make_one_shot_iterator().get_next()
print(features.get_shape().as_list(), label.get_shape().as_list())
with tf.Session() as sess:
    try:
        while True:
            f, l = sess.run([features, label])
            print(digest(f), l.tolist())
    except tf.errors.OutOfRangeError:
        print("end of epoch")
""")

input_program("imagenet_tfrecords_preprocessing")("""
rs = np.random.RandomState(3)
out_dir = workdir + "/imagenet"
tf.gfile.MakeDirs(out_dir)

def _int64_feature(value):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

def _bytes_feature(value):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

# --- conversion: JPEG-encoded images into TFRecord shards
if True:
    for shard in range(2):
        with tf.python_io.TFRecordWriter(out_dir + "/train-%05d-of-00002" % shard) as writer:
            for i in range(4):
                h, w = 40 + 8 * i, 56 - 4 * i
                pixels = rs.randint(0, 256, (h, w, 3)).astype(np.uint8)
                example = tf.train.Example(features=tf.train.Features(feature={
                    "image/encoded": _bytes_feature(make_jpeg(pixels, 90)),
                    "image/class/label": _int64_feature(1 + i + 4 * shard),
                    "image/height": _int64_feature(h),
                    "image/width": _int64_feature(w)}))
                writer.write(example.SerializeToString())

# --- reading
def parse_record(raw_record):
    feature_map = {
        "image/encoded": tf.FixedLenFeature([], dtype=tf.string, default_value=""),
        "image/class/label": tf.FixedLenFeature([], dtype=tf.int64, default_value=-1),
    }
    features = tf.parse_single_example(raw_record, feature_map)
    label = tf.cast(features["image/class/label"], dtype=tf.int32)
    return features["image/encoded"], label

def eval_image(image_buffer, height=32, width=32):
    # Inception-style evaluation: central crop, bilinear resize (TF1's), scaled to [-1, 1]
    image = tf.image.decode_jpeg(image_buffer, channels=3)
    image = tf.image.convert_image_dtype(image, dtype=tf.float32)
    image = tf.image.central_crop(image, central_fraction=0.875)
    image = tf.expand_dims(image, 0)
    image = tf.image.resize_bilinear(image, [height, width], align_corners=False)
    image = tf.squeeze(image, [0])
    image = tf.subtract(image, 0.5)
    image = tf.multiply(image, 2.0)
    return image

def train_image(image_buffer, bbox, height=24, width=24):
    # Inception-style training: a distorted box, a random resize method, flips, colors
    image = tf.image.decode_jpeg(image_buffer, channels=3)
    image = tf.image.convert_image_dtype(image, dtype=tf.float32)
    begin, size, _ = tf.image.sample_distorted_bounding_box(
        tf.shape(image), bounding_boxes=bbox, min_object_covered=0.1,
        aspect_ratio_range=[0.75, 1.33], area_range=[0.05, 1.0], max_attempts=100,
        use_image_if_no_bounding_boxes=True)
    image = tf.slice(image, begin, size)
    image = tf.image.resize_images(image, [height, width], method=tf.image.ResizeMethod.BILINEAR)
    image.set_shape([height, width, 3])
    image = tf.image.random_flip_left_right(image)
    image = tf.image.random_brightness(image, max_delta=32. / 255.)
    image = tf.image.random_saturation(image, lower=0.5, upper=1.5)
    image = tf.image.random_hue(image, max_delta=0.2)
    image = tf.image.random_contrast(image, lower=0.5, upper=1.5)
    image = tf.clip_by_value(image, 0.0, 1.0)
    return image

filenames = sorted(tf.gfile.Glob(out_dir + "/train-*"))
print([f.split("/")[-1] for f in filenames])
bbox = tf.constant([0.0, 0.0, 1.0, 1.0], dtype=tf.float32, shape=[1, 1, 4])
ds = tf.data.TFRecordDataset(filenames).map(parse_record)
evals = ds.map(lambda buf, label: (eval_image(buf), label)).batch(4)
trains = ds.map(lambda buf, label: (train_image(buf, bbox), label)).batch(4)
e_images, e_labels = evals.make_one_shot_iterator().get_next()
t_images, t_labels = trains.make_one_shot_iterator().get_next()
with tf.Session() as sess:
    for _ in range(2):
        im, lb = sess.run([e_images, e_labels])
        print(digest(im), lb.tolist())
    im, lb = sess.run([t_images, t_labels])
    print(im.shape, im.dtype, bool(im.min() >= 0.0 and im.max() <= 1.0), lb.tolist())
""")

input_program("census_csv")("""
_CSV_COLUMNS = ["age", "workclass", "fnlwgt", "education", "education_num", "hours_per_week",
                "income_bracket"]
_CSV_COLUMN_DEFAULTS = [[0], [""], [0], [""], [0], [0.0], [""]]
rs = np.random.RandomState(5)
with tf.gfile.Open(workdir + "/adult.data", "w") as f:
    for i in range(30):
        f.write("%d,%s,%d,%s,%d,%.1f,%s\\n" % (
            rs.randint(17, 90), ["Private", "State-gov", "Self-emp"][i % 3],
            rs.randint(10000, 500000), ["Bachelors", "HS-grad", "Masters"][i % 3 - 1],
            rs.randint(1, 16), rs.randint(10, 99) / 2.0, [">50K", "<=50K"][i % 2]))
tf.logging.set_verbosity(tf.logging.INFO)

def input_fn(data_file, num_epochs, shuffle, batch_size):
    assert tf.gfile.Exists(data_file), "%s not found." % data_file

    def parse_csv(value):
        tf.logging.info("Parsing {}".format(data_file))
        columns = tf.decode_csv(value, record_defaults=_CSV_COLUMN_DEFAULTS)
        features = dict(zip(_CSV_COLUMNS, columns))
        labels = features.pop("income_bracket")
        return features, tf.equal(labels, ">50K")

    dataset = tf.data.TextLineDataset(data_file)
    if shuffle:
        dataset = dataset.shuffle(buffer_size=1000)
    dataset = dataset.map(parse_csv, num_parallel_calls=5)
    dataset = dataset.repeat(num_epochs)
    dataset = dataset.batch(batch_size)
    return dataset

ds = input_fn(workdir + "/adult.data", 2, False, 16)   # string columns: no fused form
features, labels = ds.make_one_shot_iterator().get_next()
print(sorted((k, v.dtype.name) for k, v in features.items()))
with tf.Session() as sess:
    n = 0
    while True:
        try:
            f, l = sess.run([features, labels])
        except tf.errors.OutOfRangeError:
            break
        n += len(l)
        print(f["age"].tolist(), f["education"][:3].tolist(), f["hours_per_week"][:4].tolist(),
              l.astype(int).tolist())
    print("rows", n)
""")

input_program("tfrecord_writer_conversion")("""
rs = np.random.RandomState(11)
images = rs.randint(0, 256, size=(12, 8, 8, 1)).astype(np.uint8)
labels = rs.randint(0, 10, size=12)

def _int64_feature(value):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

def _bytes_feature(value):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

def convert_to(images, labels, name):
    num_examples, rows, cols, depth = images.shape
    filename = workdir + "/" + name + ".tfrecords"
    print("Writing", name)
    with tf.python_io.TFRecordWriter(filename) as writer:
        for index in range(num_examples):
            example = tf.train.Example(features=tf.train.Features(feature={
                "height": _int64_feature(rows), "width": _int64_feature(cols),
                "depth": _int64_feature(depth), "label": _int64_feature(int(labels[index])),
                "image_raw": _bytes_feature(images[index].tobytes())}))
            writer.write(example.SerializeToString(deterministic=True))
    return filename

train_file = convert_to(images, labels, "train")
with tf.gfile.GFile(train_file, "rb") as f:
    print("file", hashlib.md5(f.read()).hexdigest())

def read_and_decode(filename_queue):
    reader = tf.TFRecordReader()
    _, serialized_example = reader.read(filename_queue)
    features = tf.parse_single_example(serialized_example, features={
        "image_raw": tf.FixedLenFeature([], tf.string),
        "label": tf.FixedLenFeature([], tf.int64)})
    image = tf.decode_raw(features["image_raw"], tf.uint8)
    image.set_shape([64])
    image = tf.cast(image, tf.float32) * (1. / 255) - 0.5
    label = tf.cast(features["label"], tf.int32)
    return image, label

filename_queue = tf.train.string_input_producer([train_file], num_epochs=2, shuffle=False)
image, label = read_and_decode(filename_queue)
images_b, labels_b = tf.train.batch([image, label], batch_size=5, num_threads=1,
                                    allow_smaller_final_batch=True)
init_op = tf.group(tf.global_variables_initializer(), tf.local_variables_initializer())
with tf.Session() as sess:
    sess.run(init_op)
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(sess=sess, coord=coord)
    try:
        step = 0
        while not coord.should_stop():
            im, lb = sess.run([images_b, labels_b])
            print(step, digest(im), lb.tolist())
            step += 1
    except tf.errors.OutOfRangeError:
        print("Done training for 2 epochs, %d steps." % step)
    finally:
        coord.request_stop()
    coord.join(threads)
""")

input_program("ptb_producer")("""
words = ("the cat sat on the mat and the dog sat on the log while the cat ran " * 6).split()
with tf.gfile.GFile(workdir + "/ptb.train.txt", "w") as f:
    f.write(" ".join(words).replace("log while", "log <eos> while"))

def _read_words(filename):
    with tf.gfile.GFile(filename, "r") as f:
        return f.read().replace("\\n", "<eos>").split()

def _build_vocab(filename):
    data = _read_words(filename)
    counts = {}
    for w in data:
        counts[w] = counts.get(w, 0) + 1
    ordered = sorted(counts.items(), key=lambda x: (-x[1], x[0]))
    return dict((w, i) for i, (w, _) in enumerate(ordered))

word_to_id = _build_vocab(workdir + "/ptb.train.txt")
raw_data = [word_to_id[w] for w in _read_words(workdir + "/ptb.train.txt")]

def ptb_producer(raw_data, batch_size, num_steps, name=None):
    with tf.name_scope(name, "PTBProducer", [raw_data, batch_size, num_steps]):
        raw_data = tf.convert_to_tensor(raw_data, name="raw_data", dtype=tf.int32)
        data_len = tf.size(raw_data)
        batch_len = data_len // batch_size
        data = tf.reshape(raw_data[0: batch_size * batch_len], [batch_size, batch_len])
        epoch_size = (batch_len - 1) // num_steps
        assertion = tf.assert_positive(epoch_size, message="epoch_size == 0")
        with tf.control_dependencies([assertion]):
            epoch_size = tf.identity(epoch_size, name="epoch_size")
        i = tf.train.range_input_producer(epoch_size, shuffle=False).dequeue()
        x = tf.strided_slice(data, [0, i * num_steps], [batch_size, (i + 1) * num_steps])
        x.set_shape([batch_size, num_steps])
        y = tf.strided_slice(data, [0, i * num_steps + 1], [batch_size, (i + 1) * num_steps + 1])
        y.set_shape([batch_size, num_steps])
        return x, y

x, y = ptb_producer(raw_data, 3, 5)
print(len(word_to_id), x.get_shape().as_list())
with tf.Session() as sess:
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(sess, coord=coord)
    for _ in range(4):
        xv, yv = sess.run([x, y])
        print(xv.tolist(), yv[:, -1].tolist())
    coord.request_stop()
    coord.join(threads)
""")

input_program("jpeg_folder_dataset")("""
rs = np.random.RandomState(2)
root = workdir + "/flower_photos"
if True:
    for c, name in enumerate(["daisy", "roses", "tulips"]):
        tf.gfile.MakeDirs(root + "/" + name)
        for i in range(3):
            pixels = rs.randint(0, 256, (30 + 5 * i, 20 + 7 * c, 3)).astype(np.uint8)
            with tf.gfile.GFile("%s/%s/img_%d.jpg" % (root, name, i), "wb") as f:
                f.write(make_jpeg(pixels, 95))
classes = sorted(d for d in tf.gfile.ListDirectory(root) if tf.gfile.IsDirectory(root + "/" + d))
paths, labels = [], []
for k, c in enumerate(classes):
    for p in sorted(tf.gfile.Glob(root + "/" + c + "/*.jpg")):
        paths.append(p)
        labels.append(k)

def load(path, label):
    image_string = tf.read_file(path)
    image = tf.image.decode_jpeg(image_string, channels=3)
    image = tf.image.resize_images(image, [16, 16])
    image = tf.cast(image, tf.float32) / 255.0
    return image, tf.one_hot(label, len(classes))

ds = tf.data.Dataset.from_tensor_slices((tf.constant(paths), tf.constant(labels)))
ds = ds.map(load).batch(4)
images, onehot = ds.make_one_shot_iterator().get_next()
with tf.Session() as sess:
    while True:
        try:
            im, oh = sess.run([images, onehot])
        except tf.errors.OutOfRangeError:
            break
        print(digest(im), oh.argmax(axis=1).tolist())
""")

input_program("feedable_train_eval")("""
rs = np.random.RandomState(4)
x_train = rs.randint(0, 256, (40, 6)).astype(np.uint8)
y_train = rs.randint(0, 3, 40).astype(np.int64)
x_test, y_test = x_train[:10], y_train[:10]

def preprocess(x, y):
    x = tf.reshape(tf.cast(x, tf.float32) / 255.0, [2, 3])
    return x, y

train_ds = tf.data.Dataset.from_tensor_slices((x_train, y_train)).map(preprocess).repeat().batch(8)
test_ds = tf.data.Dataset.from_tensor_slices((x_test, y_test)).map(preprocess).batch(5)
expect_fused(train_ds)
handle = tf.placeholder(tf.string, shape=[])
iterator = tf.data.Iterator.from_string_handle(handle, train_ds.output_types, train_ds.output_shapes)
next_x, next_y = iterator.get_next()
mean_x = tf.reduce_mean(next_x, axis=[1, 2])
train_it = train_ds.make_one_shot_iterator()
test_it = test_ds.make_initializable_iterator()
with tf.Session() as sess:
    train_h, test_h = sess.run([train_it.string_handle(), test_it.string_handle()])
    for step in range(6):
        m, yv = sess.run([mean_x, next_y], feed_dict={handle: train_h})
        print("train", step, digest(m), yv.tolist())
        if step % 3 == 2:
            sess.run(test_it.initializer)
            while True:
                try:
                    m, yv = sess.run([mean_x, next_y], feed_dict={handle: test_h})
                except tf.errors.OutOfRangeError:
                    break
                print("  eval", digest(m), yv.tolist())
""")
