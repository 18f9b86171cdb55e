"""The input-pipeline code blocks of the tf.data guide, its tutorials and TF1's reading-data
guide (copies in the project's seed documents), as programs written against
``tf = tensorflow.compat.v1``: each runs unchanged with ``tf = nbdata.compat.v1``.

Every program gets ``tf``, ``np``, ``print`` (which records what it prints) and
``workdir`` (an empty folder). The guide's fragments that use a session without making
one run inside ``with tf.Session() as sess:``; loops the guide leaves unbounded
(``while True``, 20 epochs) are shortened; a model (``tf.layers``, optimizers) or a
dataset download is replaced by small stand-in data and NumPy-style ops. Random values
(``tf.random_uniform`` inside a map, ``shuffle`` without a seed) are not printed: only
what TensorFlow's documentation fixes (counts, shapes, ranges, orders it defines).
"""

PROGRAMS = {}


def program(name):
    def register(src):
        PROGRAMS[name] = src
        return src
    return register


program("guide_one_shot")("""
dataset = tf.data.Dataset.range(100)
iterator = dataset.make_one_shot_iterator()
next_element = iterator.get_next()
with tf.Session() as sess:
    for i in range(100):
        value = sess.run(next_element)
        assert i == value
    print(value)
""")

program("guide_initializable")("""
max_value = tf.placeholder(tf.int64, shape=[])
dataset = tf.data.Dataset.range(max_value)
iterator = dataset.make_initializable_iterator()
next_element = iterator.get_next()
with tf.Session() as sess:
    # Initialize an iterator over a dataset with 10 elements.
    sess.run(iterator.initializer, feed_dict={max_value: 10})
    for i in range(10):
        value = sess.run(next_element)
        assert i == value
    # Initialize the same iterator over a dataset with 100 elements.
    sess.run(iterator.initializer, feed_dict={max_value: 100})
    for i in range(100):
        value = sess.run(next_element)
        assert i == value
    print(value)
""")

program("guide_reinitializable")("""
# Define training and validation datasets with the same structure.
training_dataset = tf.data.Dataset.range(100).map(
    lambda x: x + tf.random_uniform([], -10, 10, tf.int64))
validation_dataset = tf.data.Dataset.range(50)
iterator = tf.data.Iterator.from_structure(training_dataset.output_types,
                                           training_dataset.output_shapes)
next_element = iterator.get_next()
training_init_op = iterator.make_initializer(training_dataset)
validation_init_op = iterator.make_initializer(validation_dataset)
with tf.Session() as sess:
    for _ in range(3):
        sess.run(training_init_op)
        values = [sess.run(next_element) for _ in range(100)]
        assert all(i - 10 <= v < i + 10 for i, v in enumerate(values))
        sess.run(validation_init_op)
        print([int(sess.run(next_element)) for _ in range(50)][-3:])
""")

program("guide_feedable")("""
training_dataset = tf.data.Dataset.range(100).map(
    lambda x: x + tf.random_uniform([], -10, 10, tf.int64)).repeat()
validation_dataset = tf.data.Dataset.range(50)
handle = tf.placeholder(tf.string, shape=[])
iterator = tf.data.Iterator.from_string_handle(
    handle, training_dataset.output_types, training_dataset.output_shapes)
next_element = iterator.get_next()
training_iterator = training_dataset.make_one_shot_iterator()
validation_iterator = validation_dataset.make_initializable_iterator()
with tf.Session() as sess:
    training_handle = sess.run(training_iterator.string_handle())
    validation_handle = sess.run(validation_iterator.string_handle())
    for epoch in range(2):
        # the training dataset resumes where it left off
        values = [sess.run(next_element, feed_dict={handle: training_handle}) for _ in range(200)]
        assert all(i % 100 - 10 <= v < i % 100 + 10 for i, v in enumerate(values))
        sess.run(validation_iterator.initializer)
        print([int(sess.run(next_element, feed_dict={handle: validation_handle}))
               for _ in range(50)][:3])
""")

program("guide_get_next_into_an_op")("""
dataset = tf.data.Dataset.range(5)
iterator = dataset.make_initializable_iterator()
next_element = iterator.get_next()
result = tf.add(next_element, next_element)
with tf.Session() as sess:
    sess.run(iterator.initializer)
    print(sess.run(result))  # ==> "0"
    print(sess.run(result))  # ==> "2"
    print(sess.run(result))  # ==> "4"
    print(sess.run(result))  # ==> "6"
    print(sess.run(result))  # ==> "8"
    try:
        sess.run(result)
    except tf.errors.OutOfRangeError:
        print("End of dataset")  # ==> "End of dataset"
""")

program("guide_epochs_over_tfrecords")("""
filenames = [workdir + "/file1.tfrecord", workdir + "/file2.tfrecord"]
for k, name in enumerate(filenames):
    with tf.python_io.TFRecordWriter(name) as writer:
        for i in range(40):
            writer.write(b"record %d of file %d" % (i, k))
dataset = tf.data.TFRecordDataset(filenames)
dataset = dataset.map(lambda r: tf.decode_raw(r, tf.uint8)[0])
dataset = dataset.batch(32)
iterator = dataset.make_initializable_iterator()
next_element = iterator.get_next()
with tf.Session() as sess:
    for _ in range(3):
        sess.run(iterator.initializer)
        sizes = []
        while True:
            try:
                sizes.append(sess.run(next_element).shape)
            except tf.errors.OutOfRangeError:
                break
        print(sizes)
""")

program("guide_saveable_iterator")("""
dataset = tf.data.Dataset.range(10).shuffle(10, seed=7)
iterator = dataset.make_initializable_iterator()
next_element = iterator.get_next()
# Create saveable object from iterator.
saveable = tf.contrib.data.make_saveable_from_iterator(iterator)
# Save the iterator state by adding it to the saveable objects collection.
tf.add_to_collection(tf.GraphKeys.SAVEABLE_OBJECTS, saveable)
saver = tf.train.Saver()
path_to_checkpoint = workdir + "/model.ckpt"
with tf.Session() as sess:
    sess.run(iterator.initializer)
    first = [int(sess.run(next_element)) for _ in range(4)]
    saver.save(sess, path_to_checkpoint)
    rest = [int(sess.run(next_element)) for _ in range(6)]
# Restore the iterator state (TF restores into an initialized iterator).
with tf.Session() as sess:
    sess.run(iterator.initializer)
    saver.restore(sess, path_to_checkpoint)
    again = [int(sess.run(next_element)) for _ in range(6)]
print(again == rest, sorted(first + again))
""")

program("guide_placeholders_for_numpy_arrays")("""
features = np.arange(24, dtype=np.float32).reshape(6, 4)
labels = np.arange(6, dtype=np.int64) % 3
assert features.shape[0] == labels.shape[0]
features_placeholder = tf.placeholder(features.dtype, features.shape)
labels_placeholder = tf.placeholder(labels.dtype, labels.shape)
dataset = tf.data.Dataset.from_tensor_slices((features_placeholder, labels_placeholder))
dataset = dataset.batch(4)
iterator = dataset.make_initializable_iterator()
next_batch = iterator.get_next()
with tf.Session() as sess:
    sess.run(iterator.initializer, feed_dict={features_placeholder: features,
                                              labels_placeholder: labels})
    print(sess.run(next_batch))
    print(sess.run(next_batch))
""")

program("tutorial_one_shot")("""
x = np.arange(0, 10)
dx = tf.data.Dataset.from_tensor_slices(x)
iterator = dx.make_one_shot_iterator()
next_element = iterator.get_next()
with tf.Session() as sess:
    try:
        for i in range(11):
            val = sess.run(next_element)
            print(val)
    except tf.errors.OutOfRangeError:
        print("OutOfRangeError")
""")

program("tutorial_reinitialized")("""
x = np.arange(0, 10)
dx = tf.data.Dataset.from_tensor_slices(x)
iterator = dx.make_initializable_iterator()
next_element = iterator.get_next()
with tf.Session() as sess:
    sess.run(iterator.initializer)
    for i in range(15):
        val = sess.run(next_element)
        print(val)
        if i % 9 == 0 and i > 0:
            sess.run(iterator.initializer)
""")

program("tutorial_batch")("""
x = np.arange(0, 10)
dx = tf.data.Dataset.from_tensor_slices(x).batch(3)
iterator = dx.make_initializable_iterator()
next_element = iterator.get_next()
with tf.Session() as sess:
    sess.run(iterator.initializer)
    for i in range(15):
        val = sess.run(next_element)
        print(val)
        if (i + 1) % (10 // 3) == 0 and i > 0:
            sess.run(iterator.initializer)
""")

program("tutorial_zip")("""
def simple_zip_example():
    x = np.arange(0, 10)
    y = np.arange(1, 11)
    # create dataset objects from the arrays
    dx = tf.data.Dataset.from_tensor_slices(x)
    dy = tf.data.Dataset.from_tensor_slices(y)
    # zip the two datasets together
    dcomb = tf.data.Dataset.zip((dx, dy)).batch(3)
    iterator = dcomb.make_initializable_iterator()
    # extract an element
    next_element = iterator.get_next()
    with tf.Session() as sess:
        sess.run(iterator.initializer)
        for i in range(15):
            val = sess.run(next_element)
            print(val)
            if (i + 1) % (10 // 3) == 0 and i > 0:
                sess.run(iterator.initializer)
simple_zip_example()
""")

program("tutorial_zip_repeat")("""
x = np.arange(0, 10)
y = np.arange(1, 11)
dx = tf.data.Dataset.from_tensor_slices(x)
dy = tf.data.Dataset.from_tensor_slices(y)
dcomb = tf.data.Dataset.zip((dx, dy)).repeat().batch(3)
iterator = dcomb.make_initializable_iterator()
next_element = iterator.get_next()
with tf.Session() as sess:
    sess.run(iterator.initializer)
    for i in range(5):
        print(sess.run(next_element))
""")

program("tutorial_digits")("""
# stand-in for sklearn's load_digits(return_X_y=True): 100 8x8 images, labels 0-9
rng = np.random.RandomState(0)
digits = (rng.randint(0, 17, size=(100, 64)).astype(np.float64), np.arange(100) % 10)
train_images = digits[0][:int(len(digits[0]) * 0.8)]
train_labels = digits[1][:int(len(digits[0]) * 0.8)]
valid_images = digits[0][int(len(digits[0]) * 0.8):]
valid_labels = digits[1][int(len(digits[0]) * 0.8):]
dx_train = tf.data.Dataset.from_tensor_slices(train_images)
dy_train = tf.data.Dataset.from_tensor_slices(train_labels).map(lambda z: tf.one_hot(z, 10))
train_dataset = tf.data.Dataset.zip((dx_train, dy_train)).shuffle(500).repeat().batch(30)
dx_valid = tf.data.Dataset.from_tensor_slices(valid_images)
dy_valid = tf.data.Dataset.from_tensor_slices(valid_labels).map(lambda z: tf.one_hot(z, 10))
valid_dataset = tf.data.Dataset.zip((dx_valid, dy_valid)).shuffle(500).repeat().batch(30)
iterator = tf.data.Iterator.from_structure(train_dataset.output_types,
                                           train_dataset.output_shapes)
next_element = iterator.get_next()
training_init_op = iterator.make_initializer(train_dataset)
validation_init_op = iterator.make_initializer(valid_dataset)
# stand-in for the model (nbdata builds no models): a fixed scaling of 10 pixels
logits = next_element[0][:, :10] * tf.constant(np.linspace(-1, 1, 10))
prediction = tf.argmax(logits, 1)
equality = tf.equal(prediction, tf.argmax(next_element[1], 1))
accuracy = tf.reduce_mean(tf.cast(equality, tf.float32))
init_op = tf.global_variables_initializer()
with tf.Session() as sess:
    sess.run(init_op)
    sess.run(training_init_op)
    for i in range(6):
        images, onehot, acc = sess.run([next_element[0], next_element[1], accuracy])
        assert 0.0 <= acc <= 1.0
    print(images.shape, images.dtype, onehot.shape, onehot.dtype, onehot.sum(axis=1).tolist()[:3])
    sess.run(validation_init_op)
    accs = [sess.run([accuracy])[0] for _ in range(3)]
    print(len(accs), type(accs[0]).__name__)
""")

program("reading_data_csv_queue")("""
filenames = []
for k in range(2):
    name = workdir + "/file%d.csv" % k
    with open(name, "w") as f:
        for i in range(5):
            f.write("%d,%d,%d,%d,%d\\n" % (k, i, i * 2, i * 3, i % 2))
    filenames.append(name)
filename_queue = tf.train.string_input_producer(filenames, shuffle=False, num_epochs=1)
reader = tf.TextLineReader()
key, value = reader.read(filename_queue)
record_defaults = [[1], [1], [1], [1], [1]]
col1, col2, col3, col4, col5 = tf.decode_csv(value, record_defaults=record_defaults)
features = tf.stack([col1, col2, col3, col4])
with tf.Session() as sess:
    sess.run(tf.local_variables_initializer())
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(coord=coord)
    rows = []
    try:
        while True:
            example, label = sess.run([features, col5])
            rows.append((example.tolist(), int(label)))
    except tf.errors.OutOfRangeError:
        pass
    coord.request_stop()
    coord.join(threads)
print(rows)
""")

program("reading_data_shuffle_batch")("""
def read_my_file_format(filename_queue):
    reader = tf.TextLineReader()
    key, record_string = reader.read(filename_queue)
    example, label = tf.decode_csv(record_string, record_defaults=[[0.0], [0]])
    processed_example = example * 2.0
    return processed_example, label

def input_pipeline(filenames, batch_size, num_epochs=None):
    filename_queue = tf.train.string_input_producer(
        filenames, num_epochs=num_epochs, shuffle=True)
    example, label = read_my_file_format(filename_queue)
    min_after_dequeue = 10
    capacity = min_after_dequeue + 3 * batch_size
    example_batch, label_batch = tf.train.shuffle_batch(
        [example, label], batch_size=batch_size, capacity=capacity,
        min_after_dequeue=min_after_dequeue)
    return example_batch, label_batch

filenames = []
for k in range(3):
    name = workdir + "/data%d.csv" % k
    with open(name, "w") as f:
        for i in range(20):
            f.write("%d.5,%d\\n" % (k * 100 + i, k))
    filenames.append(name)
example_batch, label_batch = input_pipeline(filenames, batch_size=8, num_epochs=2)
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.local_variables_initializer())
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(sess=sess, coord=coord)
    seen = []
    try:
        while not coord.should_stop():
            x, y = sess.run([example_batch, label_batch])
            seen.extend(zip(x.tolist(), y.tolist()))
    except tf.errors.OutOfRangeError:
        print("Done training -- epoch limit reached")
    finally:
        coord.request_stop()
    coord.join(threads)
print(len(seen), sorted(seen)[:3], sorted(seen)[-1])
""")

program("slides_tfrecord_pipeline")("""
filenames = [workdir + "/file1.tfrecord", workdir + "/file2.tfrecord"]
for k, name in enumerate(filenames):
    with tf.python_io.TFRecordWriter(name) as writer:
        for i in range(50):
            example = tf.train.Example(features=tf.train.Features(feature={
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[k * 100 + i])),
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i * 0.5, -i]))}))
            writer.write(example.SerializeToString())
features = {"label": tf.FixedLenFeature([], tf.int64), "x": tf.FixedLenFeature([2], tf.float32)}
# Read records from a list of files.
dataset = tf.data.TFRecordDataset(filenames)
# Parse string values into tensors.
dataset = dataset.map(lambda record: tf.parse_single_example(record, features))
# Randomly shuffle using a buffer of 10000 examples.
dataset = dataset.shuffle(10000)
# Repeat for 100 epochs (2 here).
dataset = dataset.repeat(2)
# Combine 128 consecutive elements into a batch.
dataset = dataset.batch(128)
next_element = dataset.make_one_shot_iterator().get_next()
with tf.Session() as sess:
    batches = []
    try:
        while True:
            batches.append(sess.run(next_element))
    except tf.errors.OutOfRangeError:
        pass
print([b["label"].shape for b in batches], batches[0]["x"].dtype)
labels = sorted(v for b in batches for v in b["label"].tolist())
print(labels[:3], labels[-3:], len(labels))
""")

program("slides_generator")("""
def generator():
    i = 0
    while True:
        yield i * i
        i += 1
dataset = tf.data.Dataset.from_generator(generator, tf.int32).take(5)
next_element = dataset.make_one_shot_iterator().get_next()
with tf.Session() as sess:
    print([int(sess.run(next_element)) for _ in range(5)])
""")

program("slides_one_shot_train_loop")("""
features = np.arange(40, dtype=np.float32).reshape(10, 4)
labels = np.arange(10) % 3
dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(4)
# A one-shot iterator automatically initializes itself on first use.
iterator = dataset.make_one_shot_iterator()
# The return value of get_next() matches the dataset element type.
images, labels = iterator.get_next()
# stand-in for model_and_optimizer(images, labels)
train_op = tf.reduce_sum(images) + tf.cast(tf.reduce_sum(labels), tf.float32)
with tf.Session() as sess:
    # Loop until all elements have been consumed.
    try:
        while True:
            print(sess.run(train_op))
    except tf.errors.OutOfRangeError:
        pass
""")

program("slides_decode_jpeg")("""
import io
from PIL import Image
rng = np.random.RandomState(1)
blobs = []
for k in range(3):
    pixels = (rng.rand(16, 24, 3) * 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90)
    blobs.append(out.getvalue())
dataset = tf.data.Dataset.from_tensor_slices(np.array(blobs, dtype=object))
dataset = dataset.map(lambda x: tf.image.decode_jpeg(x))
dataset = dataset.repeat(2)
next_element = dataset.make_one_shot_iterator().get_next()
with tf.Session() as sess:
    for _ in range(6):
        image = sess.run(next_element)
        print(image.shape, image.dtype, int(image.sum()))
""")
